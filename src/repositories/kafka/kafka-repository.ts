import { randomUUID } from 'node:crypto';
import { type Admin, Kafka, logLevel, Partitioners, type Producer, type SASLOptions } from 'kafkajs';
import { InvalidInputError, RepositoryError, toRepositoryError } from '../../errors.js';
import {
  type ChangelogEntry,
  ChangelogReader,
  decodeMark,
  encodeMark,
  ensureChangelogTopic,
  markRecord,
  type PartitionOffsets,
} from '../../kafka/changelog/index.js';
import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../base.js';
import { idOfKey, MAX_ID_BYTES } from '../ids.js';
import { type HeldRecord, MemoryRepository } from '../memory/memory-repository.js';
import type { AddOptions, AddResult, IdempotencyRecord, RepositoryCapabilities } from '../types.js';
import { type KafkaOptions, type KafkaRepositoryOptions, parseKafkaOptions } from './options.js';

/** Header naming the repository instance that wrote a record, so it can tell its own writes when it reads them back. */
const WRITER_HEADER = 'idem-writer';
/** Most bytes of marks per produce request, under the broker's default 1 MiB message.max.bytes. */
const MAX_REQUEST_BYTES = 900_000;
/** Pause before a failed tail starts again from where it stopped. */
const TAIL_RETRY_MS = 1_000;

/** One write to the topic: the record a key now holds, or undefined for a tombstone. */
interface Change {
  readonly key: string;
  readonly before: HeldRecord | undefined;
  readonly after: HeldRecord | undefined;
}

/**
 * Ids kept in a compacted Kafka topic, with the memory store as the local index it answers from (Camel's
 * KafkaIdempotentRepository, without CAMEL-20218: `open` reads the topic up to the end offsets it captured before it
 * resolves, so a restarted consumer sees its own last marks).
 *
 * Each write is decided in the local index (atomic within this process), sent to the topic with acks from all
 * in-sync replicas, and undone locally if the topic refuses it; the call resolves only after the acks. A reader
 * follows the topic for as long as the repository is open, so the marks of other instances on the same topic
 * arrive within about a fetch. Two instances can still both claim an id that neither has read yet: the store is not
 * shared-atomic (`capabilities.shared` is false). See docs/kafka-repository.md.
 */
export class KafkaRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities;
  protected readonly storeName = 'kafka';
  readonly #options: KafkaOptions;
  readonly #kafka: Kafka;
  readonly #producer: Producer;
  readonly #reader: ChangelogReader;
  readonly #index: MemoryRepository;
  readonly #writer = randomUUID();
  /** Own writes per key that the tail has not read back yet; older records of other writers must not undo them. */
  readonly #unread = new Map<string, number>();
  /** Where the tail is, per partition, so a failed tail resumes there. */
  readonly #positions: PartitionOffsets = new Map();
  readonly #stop = new AbortController();
  #tail: Promise<void> = Promise.resolve();
  #unreadable = 0;

  private constructor(options: KafkaOptions, kafka: Kafka, producer: Producer, clock?: () => number) {
    super(clock ? { clock } : {});
    this.#options = options;
    this.#kafka = kafka;
    this.#producer = producer;
    this.#reader = new ChangelogReader(kafka);
    this.#index = new MemoryRepository({ maxEntries: options.maxEntries, clock: this.clock });
    this.capabilities = {
      persistent: true,
      shared: false,
      maxIdBytes: MAX_ID_BYTES,
      nativeBatch: true,
      // Marks older than the topic's retention are deleted with it.
      maxTtlMs: options.retention,
      // A record with its result must fit a produce request under the broker's 1 MiB default.
      maxResultBytes: 262_144,
    };
  }

  /**
   * Creates (or checks) the topic, connects, and reads the topic up to the end offsets captured now before it
   * resolves. A wrong topic is a ConfigError naming `repository.topic`; a broker that cannot be reached, a
   * RepositoryError.
   */
  static async open(options: KafkaRepositoryOptions): Promise<KafkaRepository> {
    const { clock, ...rest } = options;
    const parsed = parseKafkaOptions(rest);
    const kafka = kafkaClient(parsed);
    const admin = kafka.admin();
    try {
      await admin.connect();
      await ensureChangelogTopic(admin, {
        topic: parsed.topic,
        partitions: parsed.partitions,
        retentionMs: parsed.retention,
        replicationFactor: parsed.replicationFactor,
        configKey: 'repository.topic',
      });
    } catch (error) {
      throw toRepositoryError(`kafka open (brokers ${parsed.brokers.join(',')})`, error);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
    const producer = kafka.producer({
      // Idempotent with one request in flight: a retried send can neither duplicate nor reorder an id's writes,
      // and compaction keeps the last one.
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
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

  /** The compacted topic that holds the marks. */
  get topic(): string {
    return this.#options.topic;
  }

  /** Records of the topic this version could not read (written by a newer one); they were skipped. */
  get unreadableRecords(): number {
    return this.#unreadable;
  }

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    return this.#change(
      entries.map((e) => e.key),
      () =>
        this.#index.addMany(
          entries.map(({ key, ...fields }) => ({ ...fields, id: idOfKey(key) })),
          { ...options, now },
        ),
    );
  }

  protected async doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    return this.#index.getMany(keys.map(idOfKey), { now });
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    _now: number,
  ): Promise<boolean[]> {
    return this.#change(
      claims.map((c) => c.key),
      () =>
        this.#index.confirmMany(
          claims.map(({ key, owner, result }) => ({
            id: idOfKey(key),
            owner,
            ...(result === undefined ? {} : { result }),
          })),
          { ttlMs },
        ),
    );
  }

  protected override async doRenew(
    key: string,
    owner: string,
    leaseMs: number,
    _now: number,
  ): Promise<boolean> {
    return this.#change([key], () => this.#index.renew({ id: idOfKey(key), owner }, { leaseMs }));
  }

  protected async doRemove(key: string, owner: string | undefined, _now: number): Promise<boolean> {
    return this.#change([key], () => this.#index.remove(idOfKey(key), owner));
  }

  /** Deletes every record of the topic (DeleteRecords up to its end) and empties the local index. */
  protected async doClear(): Promise<void> {
    const admin: Admin = this.#kafka.admin();
    await admin.connect();
    try {
      // Also loads the topic's metadata into the admin client, which deleteTopicRecords needs.
      const [metadata] = (await admin.fetchTopicMetadata({ topics: [this.topic] })).topics;
      const partitions = (metadata?.partitions ?? []).map((p) => ({
        partition: p.partitionId,
        offset: '-1',
      }));
      await admin.deleteTopicRecords({ topic: this.topic, partitions });
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
    await this.#index.clear();
  }

  protected async doClose(): Promise<void> {
    this.#stop.abort();
    await this.#tail;
    await Promise.allSettled([this.#producer.disconnect(), this.#reader.close()]);
    await this.#index.close();
  }

  /**
   * Runs a change on the local index, then writes the records it changed to the topic; if the topic refuses them,
   * the local change is undone (where nothing changed the key since) and the call rejects.
   */
  async #change<T>(keys: readonly string[], local: () => Promise<T>): Promise<T> {
    const before = keys.map((key) => this.#index.peekRecord(key));
    const result = await local();
    const changes: Change[] = [];
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const after = this.#index.peekRecord(key);
      if (after !== before[i]) changes.push({ key, before: before[i], after });
    }
    if (changes.length === 0) return result;
    try {
      await this.#send(changes);
    } catch (error) {
      for (const { key, before: old, after } of changes) {
        if (this.#index.peekRecord(key) !== after) continue;
        if (old === undefined) this.#index.deleteRecord(key);
        else this.#index.putRecord(key, old);
      }
      throw error;
    }
    return result;
  }

  async #send(changes: readonly Change[]): Promise<void> {
    for (const { key } of changes) this.#unread.set(key, (this.#unread.get(key) ?? 0) + 1);
    const headers = { [WRITER_HEADER]: this.#writer };
    let chunk: { key: string; value: Buffer | null; headers: typeof headers }[] = [];
    let bytes = 0;
    try {
      for (const { key, after } of changes) {
        const value = after === undefined ? null : encodeMark(this.#index.recordOf(key, after));
        const size = Buffer.byteLength(key) + (value?.length ?? 0) + 80;
        if (chunk.length > 0 && bytes + size > MAX_REQUEST_BYTES) {
          await this.#producer.send({ topic: this.topic, acks: -1, messages: chunk });
          chunk = [];
          bytes = 0;
        }
        chunk.push({ key, value, headers });
        bytes += size;
      }
      await this.#producer.send({ topic: this.topic, acks: -1, messages: chunk });
    } catch (error) {
      for (const { key } of changes) this.#readBack(key);
      throw new RepositoryError(`kafka write to topic ${this.topic} failed: ${(error as Error).message}`, {
        cause: error,
      });
    }
  }

  /** One own write of the key is accounted for (read back, or never written). */
  #readBack(key: string): void {
    const count = this.#unread.get(key) ?? 0;
    if (count <= 1) this.#unread.delete(key);
    else this.#unread.set(key, count - 1);
  }

  /** Applies records read from the topic, in topic order, to the local index. */
  #apply(records: readonly ChangelogEntry[]): void {
    for (const entry of records) {
      const writer = entry.headers[WRITER_HEADER];
      if (writer !== undefined && String(writer) === this.#writer) {
        this.#readBack(entry.key);
        continue;
      }
      // An own write of this key is later in the topic than this record: the index already holds the newer state.
      if (this.#unread.has(entry.key)) continue;
      if (entry.value === null) {
        this.#index.deleteRecord(entry.key);
        continue;
      }
      try {
        this.#index.putRecord(entry.key, markRecord(entry.key, decodeMark(entry.value)));
      } catch (error) {
        if (!(error instanceof InvalidInputError)) throw error;
        if (this.#unreadable++ === 0) {
          process.emitWarning(
            `kafka repository: skipping unreadable records of topic ${this.topic}: ${error.message}`,
          );
        }
      }
    }
  }

  /** Reads the topic to the end offsets captured now, then keeps following it until close. */
  async #warmUp(): Promise<void> {
    const partitions = await this.#reader.partitions(this.topic);
    for (const p of partitions) this.#positions.set(p, 0);
    let caughtUp!: () => void;
    const ready = new Promise<void>((resolve) => {
      caughtUp = resolve;
    });
    const first = this.#follow(caughtUp);
    this.#tail = first.then(
      () => undefined,
      (error: unknown) => this.#retryTail(error),
    );
    // A failure before the warm-up ends fails open(); after it, the tail retries on its own.
    await Promise.race([ready, first.then(() => ready)]);
  }

  #follow(onCaughtUp: () => void): Promise<PartitionOffsets> {
    return this.#reader.read({
      topic: this.topic,
      from: this.#positions,
      follow: true,
      signal: this.#stop.signal,
      onCaughtUp,
      onBatch: (partition, records, nextOffset) => {
        this.#apply(records);
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

/** The repository's own kafkajs client: quiet (failures surface as rejections), bounded retries. */
function kafkaClient(options: KafkaOptions): Kafka {
  const { allowPlaintext: _allowPlaintext, ...sasl } = options.sasl ?? { allowPlaintext: false };
  return new Kafka({
    clientId: options.clientId,
    brokers: options.brokers,
    ssl: options.ssl,
    ...(options.sasl ? { sasl: sasl as SASLOptions } : {}),
    connectionTimeout: options.connectionTimeout,
    requestTimeout: options.requestTimeout,
    logLevel: logLevel.NOTHING,
    retry: { retries: 8, initialRetryTime: 300, maxRetryTime: 10_000 },
  });
}
