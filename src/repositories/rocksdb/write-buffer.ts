import { encodeRecord } from '../record.js';
import type { IdempotencyRecord } from '../types.js';
import type { NativeBatch } from './binding.js';
import type { Bucket } from './buckets.js';

/** A stored copy of a key's record and the bucket that holds it. */
export interface Located {
  readonly record: IdempotencyRecord;
  readonly bucket: Bucket;
}

/** The newest state of a key, not yet written to RocksDB. */
export interface Pending {
  /** The record to put into `bucket`; undefined when the key is deleted. */
  readonly record: IdempotencyRecord | undefined;
  readonly bucket: Bucket | undefined;
  /** Buckets holding an older copy, from which the key is deleted. */
  readonly stale: readonly Bucket[];
}

/** Buffered changes reach RocksDB after at most this long, or sooner past FLUSH_MAX_PENDING. */
const FLUSH_INTERVAL_MS = 1_000;
const FLUSH_MAX_PENDING = 65_536;
/** Claims remembered for a read-free confirm (~150 bytes each). */
const MAX_CLAIMS = 100_000;
const NO_BUCKETS: readonly Bucket[] = [];

/**
 * Changes not yet written to RocksDB, and the in-flight claims this instance wrote.
 *
 * With the WAL on, confirmed records and deletions reach RocksDB before the call resolves. In-flight claims
 * (and, with the WAL off, every change) are buffered and written within FLUSH_INTERVAL_MS (by a timer, or by
 * the first operation past that time), on close, or never when confirmed first: a claim dies with its owner's
 * process anyway, and a crash that forgets it frees the id at once rather than at the end of its lease.
 */
export class WriteBuffer {
  readonly #wal: boolean;
  /** Runs a timed flush in the repository's operation order. */
  readonly #schedule: (flush: () => void) => Promise<unknown>;
  readonly #pending = new Map<string, Pending>();
  /** In-flight claims this instance wrote, so `confirm` needs no read; oldest dropped past MAX_CLAIMS. */
  readonly #claims = new Map<string, Located>();
  /**
   * When the oldest buffered change must be written, on `performance.now()`; undefined when nothing is
   * buffered. The timer alone cannot keep that bound: a caller whose loop of awaited calls never yields to
   * timers starves it, so every operation checks it too (`flushIfDue`).
   */
  #dueAt: number | undefined;
  #timer: NodeJS.Timeout | undefined;
  #error: unknown;

  constructor(wal: boolean, schedule: (flush: () => void) => Promise<unknown>) {
    this.#wal = wal;
    this.#schedule = schedule;
  }

  /** The key's buffered state, newer than anything on disk; undefined when nothing is buffered for it. */
  latest(key: string): Pending | undefined {
    return this.#pending.size > 0 ? this.#pending.get(key) : undefined;
  }

  /** The claim this instance wrote for the key and has not changed since: then the only copy. */
  claim(key: string): Located | undefined {
    const claim = this.#claims.size > 0 ? this.#claims.get(key) : undefined;
    return claim !== undefined && !claim.bucket.dropped ? claim : undefined;
  }

  /** Buffers `record` as the key's newest state, in `bucket`; older `copies` elsewhere are deleted. */
  put(key: string, record: IdempotencyRecord, bucket: Bucket, copies: readonly Located[] | undefined): void {
    this.#pending.set(key, { record, bucket, stale: this.#staleBuckets(key, copies, bucket) });
  }

  /** Buffers the deletion of every copy of the key. */
  delete(key: string, copies: readonly Located[]): void {
    this.#pending.set(key, { record: undefined, bucket: undefined, stale: this.#staleBuckets(key, copies) });
  }

  /** Writes what must be written now (see the class comment) and arms the timer for the rest. */
  afterWrite(): void {
    const full = this.#pending.size >= FLUSH_MAX_PENDING;
    if (this.#wal || full) {
      try {
        this.flush(!full);
      } catch (error) {
        // The call fails, so its changes must not linger in memory as if they had been stored.
        if (this.#wal) this.#pending.clear();
        throw error;
      }
    }
    if (this.#pending.size === 0) return;
    this.#dueAt ??= performance.now() + FLUSH_INTERVAL_MS;
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.#schedule(() => this.flush()).catch((error: unknown) => {
          this.#error ??= error;
        });
      }, FLUSH_INTERVAL_MS);
      this.#timer.unref();
    }
  }

  /** Writes everything buffered if its oldest change has waited FLUSH_INTERVAL_MS. Cheap when it has not. */
  flushIfDue(): void {
    if (this.#dueAt !== undefined && performance.now() >= this.#dueAt) this.flush();
  }

  /** The error of a failed timed flush, once; the next call surfaces it. */
  takeError(): unknown {
    const error = this.#error;
    this.#error = undefined;
    return error;
  }

  /**
   * Writes buffered changes, one WriteBatch per bucket; with `durableOnly` (WAL on), in-flight claims stay
   * buffered. What a failed write did not store stays buffered.
   */
  flush(durableOnly = false): void {
    if (this.#pending.size === 0) {
      this.#dueAt = undefined;
      return;
    }
    const puts = new Map<Bucket, NativeBatch>();
    const deletes = new Map<Bucket, NativeBatch>();
    const written: [string, Pending][] = [];
    const encode = valueEncoder();
    for (const entry of this.#pending) {
      const [key, change] = entry;
      if (durableOnly && change.record?.state === 'in-flight') continue;
      written.push(entry);
      if (change.record !== undefined && change.bucket !== undefined && !change.bucket.dropped) {
        batchOf(puts, change.bucket).put(key, encode(change.record));
      }
      for (const bucket of change.stale) if (!bucket.dropped) batchOf(deletes, bucket).del(key);
    }
    // Puts first: a crash in between leaves an extra copy (lookups prefer the newest), never no copy.
    try {
      for (const batch of puts.values()) batch.write();
      for (const batch of deletes.values()) batch.write();
    } catch (error) {
      // Part of it may have been written: the remembered claims can no longer be trusted.
      this.#claims.clear();
      throw error;
    }
    for (const [key, change] of written) {
      this.#pending.delete(key);
      if (this.#claims.size > 0) this.#claims.delete(key);
      if (change.record?.state === 'in-flight' && change.bucket !== undefined) {
        this.#claims.set(key, { record: change.record, bucket: change.bucket });
      }
    }
    while (this.#claims.size > MAX_CLAIMS) this.#claims.delete(this.#claims.keys().next().value as string);
    if (this.#pending.size === 0) this.#dueAt = undefined;
  }

  /** Stops the timer; what is buffered stays (close flushes it, clear discards it). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Forgets every buffered change and remembered claim. */
  discard(): void {
    this.stop();
    this.#pending.clear();
    this.#claims.clear();
    this.#dueAt = undefined;
  }

  #staleBuckets(key: string, copies: readonly Located[] | undefined, keep?: Bucket): readonly Bucket[] {
    const earlier = this.#pending.get(key)?.stale ?? NO_BUCKETS;
    if (copies === undefined && earlier.length === 0) return NO_BUCKETS;
    const stale: Bucket[] = [];
    for (const bucket of [...(copies ?? []).map((c) => c.bucket), ...earlier]) {
      if (bucket !== keep && !stale.includes(bucket)) stale.push(bucket);
    }
    return stale.length > 0 ? stale : NO_BUCKETS;
  }
}

function batchOf(batches: Map<Bucket, NativeBatch>, bucket: Bucket): NativeBatch {
  let batch = batches.get(bucket);
  if (batch === undefined) {
    batch = bucket.db.batch();
    batches.set(bucket, batch);
  }
  return batch;
}

/** Encodes records, reusing the bytes of the previous one when equal: a batch's records mostly are. */
function valueEncoder(): (record: IdempotencyRecord) => Buffer {
  let last: IdempotencyRecord | undefined;
  let bytes = Buffer.alloc(0);
  return (record) => {
    if (
      last === undefined ||
      record.expiresAt !== last.expiresAt ||
      record.state !== last.state ||
      record.leaseExpiresAt !== last.leaseExpiresAt ||
      record.owner !== last.owner ||
      record.eventTime !== last.eventTime ||
      record.fingerprint !== last.fingerprint ||
      record.result !== last.result
    ) {
      last = record;
      bytes = Buffer.from(encodeRecord(record));
    }
    return bytes;
  };
}
