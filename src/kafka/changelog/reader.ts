import { errorMessage, RepositoryError } from '../../errors.js';
import {
  AbortedTransactions,
  type FetchedPartition,
  type KafkaClient,
  type KafkaErrorClassifier,
  type MessageHeaders,
  type PartitionReader,
} from '../port/index.js';

/** One committed changelog record: the id's canonical key, its encoded mark (null: a tombstone), its offset. */
export interface ChangelogEntry {
  readonly key: string;
  readonly value: Buffer | null;
  readonly offset: number;
  readonly headers: MessageHeaders;
}

export type PartitionOffsets = Map<number, number>;

/** Fetch sizes of a {@link ChangelogReader}. */
export interface ChangelogReaderOptions {
  /** Most bytes one fetch returns over all its partitions; default 16 MiB. */
  readonly maxBytes?: number;
  /** Most bytes one fetch returns for one partition; default 8 MiB. */
  readonly maxBytesPerPartition?: number;
  /** How long the broker holds a fetch while a followed partition has nothing new, in ms; default 500. */
  readonly maxWaitMs?: number;
  /** Tries of a failed fetch (leader moved, broker away) before the read fails; default 20, backing off to 5 s. */
  readonly retries?: number;
}

/** What {@link ChangelogReader.read} reads and where the records go. */
export interface ReadChangelogOptions {
  readonly topic: string;
  /** The partitions to read, each from the first offset it has not applied (0: from the start). */
  readonly from: ReadonlyMap<number, number>;
  /**
   * Gets each fetched partition's committed records in offset order and the offset to resume from (what a
   * checkpoint saves), also none past aborted records or markers. Awaited; the next fetch is in flight.
   */
  onBatch(partition: number, records: ChangelogEntry[], nextOffset: number): void | Promise<void>;
  /** Keep reading past the end offsets captured at the start, until `signal` aborts (else stop at them). */
  readonly follow?: boolean;
  /** With `follow`: called once when every partition has reached the end offsets captured at the start. */
  readonly onCaughtUp?: (ends: PartitionOffsets) => void;
  /** Stops the read: a bounded read rejects with the signal's reason, a followed one resolves. */
  readonly signal?: AbortSignal;
  /** Called after every fetch (e.g. a consumer group heartbeat during a long restore). */
  readonly heartbeat?: () => Promise<void>;
}

const ABORT_MARKER = 0;

/** A read_committed reader with no group: big fetches from the leaders, the next one in flight. */
export class ChangelogReader {
  readonly #partitions: PartitionReader;
  readonly #errors: KafkaErrorClassifier;
  readonly #options: Required<ChangelogReaderOptions>;

  constructor(client: KafkaClient, options: ChangelogReaderOptions = {}) {
    this.#partitions = client.partitionReader();
    this.#errors = client.errors;
    const { maxBytes = 2 ** 24, maxBytesPerPartition = 2 ** 23, maxWaitMs = 500, retries = 20 } = options;
    this.#options = { maxBytes, maxBytesPerPartition, maxWaitMs, retries };
  }

  /** The topic's partition ids, from fresh metadata. */
  async partitions(topic: string): Promise<number[]> {
    return this.#partitions.partitions(topic);
  }

  /** The end offsets a read_committed reader sees now (last stable offsets), for the given partitions or all. */
  async endOffsets(topic: string, partitions?: readonly number[]): Promise<PartitionOffsets> {
    return this.#partitions.listOffsets(topic, partitions ?? (await this.partitions(topic)), 'latest');
  }

  /**
   * Reads `from`'s partitions up to the end offsets captured now (or on, with `follow`), and resolves with the
   * offsets reached. A start offset that retention has deleted, or that lies past the end (a recreated topic),
   * restarts that partition from its first offset: replaying marks is idempotent, so that costs only time.
   */
  async read(options: ReadChangelogOptions): Promise<PartitionOffsets> {
    const { topic, signal } = options;
    const follow = options.follow === true;
    const partitions = [...options.from.keys()];
    const next: PartitionOffsets = new Map([...options.from].map(([p, offset]) => [p, Math.max(0, offset)]));
    if (partitions.length === 0) return next;
    const ends = await this.#partitions.listOffsets(topic, partitions, 'latest');
    // Past the end: the topic was recreated since the offset was saved. Its marks are all new to us.
    if (partitions.some((p) => (next.get(p) ?? 0) > (ends.get(p) ?? 0)))
      await this.#restart(topic, next, ends);
    const limit = (p: number) => (follow ? Number.POSITIVE_INFINITY : (ends.get(p) ?? 0));
    const active = () => partitions.filter((p) => follow || (next.get(p) ?? 0) < limit(p));
    let caughtUp = false;
    const checkCaughtUp = () => {
      if (!follow || caughtUp) return;
      if (partitions.every((p) => (next.get(p) ?? 0) >= (ends.get(p) ?? 0))) {
        caughtUp = true;
        options.onCaughtUp?.(ends);
      }
    };
    checkCaughtUp();

    let failures = 0;
    let stalls = 0;
    const start = () => {
      const wanted = active();
      if (wanted.length === 0 || signal?.aborted) return undefined;
      const round = this.#partitions.fetch({
        topic,
        partitions: wanted.map((partition) => ({ partition, offset: next.get(partition) ?? 0 })),
        // Below the end the data is there and the broker answers at once; only a caught-up follower waits.
        maxWaitMs: follow && caughtUp ? this.#options.maxWaitMs : 100,
        maxBytes: this.#options.maxBytes,
        maxBytesPerPartition: this.#options.maxBytesPerPartition,
      });
      round.catch(() => undefined); // awaited below; this only keeps an early failure from counting as unhandled
      return round;
    };
    let pending = start();
    while (pending !== undefined) {
      let round: FetchedPartition[];
      try {
        round = await pending;
        failures = 0;
      } catch (error) {
        await this.#recover(topic, error, next, ++failures);
        pending = start();
        continue;
      }
      const batches: { partition: number; records: ChangelogEntry[]; nextOffset: number }[] = [];
      let moved = false;
      for (const part of round) {
        const from = next.get(part.partition);
        if (from === undefined) continue;
        const { records, nextOffset } = committedRecords(part, from, limit(part.partition));
        if (nextOffset > from) {
          next.set(part.partition, nextOffset);
          moved = true;
        }
        if (nextOffset > from || records.length > 0) {
          batches.push({ partition: part.partition, records, nextOffset });
        }
      }
      // Below its end a partition always has records to return; nothing at all means a log start moved.
      stalls = moved || (follow && caughtUp) ? 0 : stalls + 1;
      if (stalls >= 5) await this.#skipDeleted(topic, next, ends);
      pending = start();
      for (const batch of batches) await options.onBatch(batch.partition, batch.records, batch.nextOffset);
      if (options.heartbeat) await options.heartbeat();
      checkCaughtUp();
    }
    if (signal?.aborted && !follow) throw signal.reason;
    return next;
  }

  async close(): Promise<void> {
    await this.#partitions.close();
  }

  /** After a failed fetch: restart deleted or vanished offsets from the log start, or back off and retry. */
  async #recover(topic: string, error: unknown, next: PartitionOffsets, failures: number): Promise<void> {
    if (this.#errors.isOffsetOutOfRange(error)) {
      await this.#restart(topic, next, await this.#partitions.listOffsets(topic, [...next.keys()], 'latest'));
      return;
    }
    if (failures > this.#options.retries || this.#errors.isPermanent(error)) {
      const detail = errorMessage(error);
      throw new RepositoryError(`reading changelog topic ${topic} failed: ${detail}`, { cause: error });
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 100 * 2 ** failures)));
    await this.#partitions.refreshMetadata().catch(() => undefined);
  }

  /** Moves offsets below the log start (retention ran) or past `ends` to the log start; true if any moved. */
  async #restart(topic: string, next: PartitionOffsets, ends?: PartitionOffsets): Promise<boolean> {
    const starts = await this.#partitions.listOffsets(topic, [...next.keys()], 'earliest');
    let moved = false;
    for (const [p, offset] of next) {
      const first = starts.get(p) ?? 0;
      if (offset < first || (ends !== undefined && offset > (ends.get(p) ?? 0))) {
        next.set(p, first);
        moved = true;
      }
    }
    return moved;
  }

  /** A partition that returns nothing below its end: its log start passed the offset (retention ran). */
  async #skipDeleted(topic: string, next: PartitionOffsets, ends: PartitionOffsets): Promise<void> {
    if (await this.#restart(topic, next)) return;
    const behind = [...next].filter(([p, o]) => o < (ends.get(p) ?? 0)).map(([p, o]) => `${p}@${o}`);
    throw new RepositoryError(
      `changelog ${topic}: no records below the end offsets for partitions ${behind.join(', ')}`,
      { retryable: true },
    );
  }
}

/** {@link ChangelogReader.read} on a reader of its own; keep a ChangelogReader to read often. */
export async function readChangelog(
  client: KafkaClient,
  options: ReadChangelogOptions & ChangelogReaderOptions,
): Promise<PartitionOffsets> {
  const reader = new ChangelogReader(client, options);
  try {
    return await reader.read(options);
  } finally {
    await reader.close();
  }
}

/** A fetched partition's committed records in [from, end) and the offset after them. */
function committedRecords(
  part: FetchedPartition,
  from: number,
  end: number,
): { records: ChangelogEntry[]; nextOffset: number } {
  const aborted = new AbortedTransactions(part.abortedTransactions);
  const records: ChangelogEntry[] = [];
  let nextOffset = from;
  for (const batch of part.batches) {
    const batchLast = batch.baseOffset + batch.lastOffsetDelta;
    const { producerId, inTransaction, isControl } = batch;
    const abort = isControl && batch.records.some((r) => isAbortMarker(r.key));
    const kept = aborted.keeps(batchLast, producerId, inTransaction, isControl, abort);
    if (batchLast >= from) nextOffset = Math.max(nextOffset, Math.min(batchLast + 1, end));
    if (!kept || isControl) continue;
    for (const record of batch.records) {
      if (record.offset < from || record.offset >= end || record.key === null) continue;
      records.push(record as ChangelogEntry);
    }
  }
  return { records, nextOffset };
}

/** A control record's key is a version (int16) and a type (int16): type 0 ends an aborted transaction. */
function isAbortMarker(key: string | null): boolean {
  return key !== null && key.length >= 4 && key.charCodeAt(2) === 0 && key.charCodeAt(3) === ABORT_MARKER;
}
