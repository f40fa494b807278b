import { randomUUID } from 'node:crypto';
import { RepositoryError, toRepositoryError } from '../../errors.js';
import {
  type ChangelogEntry,
  ChangelogReader,
  ensureChangelogTopic,
  KafkaChangelogSink,
  KafkaChangelogSource,
  type PartitionOffsets,
} from '../../kafka/changelog/index.js';
import { type KafkaClient, type KafkaProducer, openKafkaClient } from '../../kafka/port/index.js';
import { ChangelogRestorer, type ChangelogSink, LoggedRepository } from '../logged/index.js';
import { MemoryRepository } from '../memory/memory-repository.js';
import { sharedStoreCapabilities } from '../shared.js';
import { type KafkaOptions, type KafkaRepositoryOptions, parseKafkaOptions } from './options.js';

/** Names the instance that wrote a record, so it knows its own writes when it reads them. */
const WRITER_HEADER = 'idem-writer';
const TAIL_RETRY_MS = 1_000;

/**
 * Ids kept in a compacted Kafka topic (Camel's KafkaIdempotentRepository, without CAMEL-20218: `open` reads the
 * topic to its end first): a {@link LoggedRepository} over the memory store with the topic as its changelog,
 * following it while open. Two instances can still both claim an id neither has read yet (not `shared`).
 */
export class KafkaRepository extends LoggedRepository {
  readonly topic: string;
  readonly #reader: ChangelogReader;
  readonly #restorer: ChangelogRestorer;
  readonly #writer: string;
  /** Own writes per key that the tail has not read back yet; older records of other writers must not undo them. */
  readonly #unread: Map<string, number>;
  /** So a failed tail resumes there. */
  readonly #positions: PartitionOffsets = new Map();
  readonly #stop = new AbortController();
  #tail: Promise<void> = Promise.resolve();
  #unreadable = 0;

  private constructor(
    options: KafkaOptions,
    kafka: KafkaClient,
    producer: KafkaProducer,
    clock?: () => number,
  ) {
    const index = new MemoryRepository({ maxEntries: options.maxEntries, ...(clock ? { clock } : {}) });
    const writer = randomUUID();
    const unread = new Map<string, number>();
    const reader = new ChangelogReader(kafka);
    const topic = new KafkaChangelogSink({
      client: kafka,
      producer,
      topic: options.topic,
      headers: { [WRITER_HEADER]: writer },
    });
    // Counts each key's own writes until the tail reads them back (see `#accept`).
    const sink: ChangelogSink = {
      async append(changes) {
        for (const { key } of changes) unread.set(key, (unread.get(key) ?? 0) + 1);
        try {
          await topic.append(changes);
        } catch (error) {
          for (const { key } of changes) readBack(unread, key);
          throw new RepositoryError(`kafka write to topic failed: ${(error as Error).message}`, {
            cause: error,
          });
        }
      },
      clear: () => topic.clear(),
      async close() {
        await Promise.allSettled([producer.disconnect(), reader.close()]);
        await kafka.close().catch(() => undefined);
      },
    };
    super(index, sink, {
      name: 'kafka',
      ...(clock ? { clock } : {}),
      // Marks go with the topic's retention; a record with its result must fit the broker's 1 MiB default.
      capabilities: sharedStoreCapabilities({
        shared: false,
        nativeBatch: true,
        maxTtlMs: options.ttl,
        maxResultBytes: 262_144,
      }),
    });
    this.topic = options.topic;
    this.#writer = writer;
    this.#unread = unread;
    this.#reader = reader;
    this.#restorer = new ChangelogRestorer({
      source: new KafkaChangelogSource({
        reader,
        topic: options.topic,
        accept: (entry) => this.#accept(entry),
      }),
    });
  }

  /** Creates (or checks) the topic, connects, and reads the topic to the end offsets captured now. */
  static async open(options: KafkaRepositoryOptions): Promise<KafkaRepository> {
    const { clock, ...rest } = options;
    const parsed = parseKafkaOptions(rest);
    // Quiet: failures surface as rejections.
    const kafka = await openKafkaClient(
      parsed,
      { retries: 8 },
      { configKey: 'repository.client', feature: 'the kafka store' },
    );
    const admin = kafka.admin();
    try {
      await admin.connect();
      await ensureChangelogTopic(admin, {
        topic: parsed.topic,
        partitions: parsed.partitions,
        retentionMs: parsed.ttl,
        replicationFactor: parsed.replicationFactor,
        configKey: 'repository.topic',
      });
    } catch (error) {
      await admin.disconnect().catch(() => undefined);
      await kafka.close().catch(() => undefined);
      throw toRepositoryError(`kafka open (brokers ${parsed.brokers.join(',')})`, error);
    }
    await admin.disconnect().catch(() => undefined);
    // Idempotent: a retried send can neither duplicate nor reorder an id's writes (compaction keeps the last).
    const producer = kafka.producer({ idempotent: true });
    const repository = new KafkaRepository(parsed, kafka, producer, clock);
    try {
      await producer.connect();
      await repository.#warmUp();
    } catch (error) {
      await repository.close().catch(() => undefined);
      throw toRepositoryError('kafka open', error);
    }
    return repository;
  }

  /** Records of the topic this version could not read (written by a newer one, or damaged); they were skipped. */
  get unreadableRecords(): number {
    return this.#unreadable;
  }

  override async close(): Promise<void> {
    this.#stop.abort();
    await this.#tail;
    return super.close();
  }

  /**
   * Whether a record read from the topic is a change to apply: not an own write (the index holds it; it is now
   * read back), and not older than an own write of its key not read back yet (the index holds a newer state).
   */
  #accept(entry: ChangelogEntry): boolean {
    const writer = entry.headers[WRITER_HEADER];
    if (writer !== undefined && String(writer) === this.#writer) {
      readBack(this.#unread, entry.key);
      return false;
    }
    return !this.#unread.has(entry.key);
  }

  async #warmUp(): Promise<void> {
    const partitions = await this.#reader.partitions(this.topic);
    for (const p of partitions) this.#positions.set(p, 0);
    let caughtUp!: () => void;
    const ready = new Promise<void>((resolve) => {
      caughtUp = resolve;
    });
    const first = this.#follow(caughtUp);
    this.#tail = first.catch((error: unknown) => this.#retryTail(error));
    // A failure before the warm-up ends fails open(); after it, the tail retries on its own.
    await Promise.race([ready, first.then(() => ready)]);
  }

  async #follow(onCaughtUp: () => void): Promise<void> {
    await this.#restorer.restore(new Map([...this.#positions.keys()].map((p) => [p, this])), {
      from: this.#positions,
      follow: true,
      signal: this.#stop.signal,
      onCaughtUp,
      onUnreadable: (bad) => {
        if (this.#unreadable++ === 0) {
          process.emitWarning(
            `kafka repository: skipping unreadable records of topic ${bad.topic} ` +
              `(first: partition ${bad.partition}, offset ${bad.offset}: ${bad.reason})`,
          );
        }
      },
      onProgress: ({ partition, nextOffset }) => {
        this.#positions.set(partition, nextOffset);
      },
    });
  }

  async #retryTail(error: unknown): Promise<void> {
    while (!this.#stop.signal.aborted) {
      process.emitWarning(
        `kafka repository: following topic ${this.topic} failed, retrying: ${(error as Error)?.message ?? error}`,
      );
      await new Promise((resolve) => setTimeout(resolve, TAIL_RETRY_MS));
      if (this.#stop.signal.aborted) return;
      try {
        await this.#follow(() => undefined);
        return;
      } catch (next) {
        error = next;
      }
    }
  }
}

/** One own write of the key was read back, or never written. */
function readBack(unread: Map<string, number>, key: string): void {
  const count = unread.get(key) ?? 0;
  if (count <= 1) unread.delete(key);
  else unread.set(key, count - 1);
}
