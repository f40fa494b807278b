import { encodeRecord } from '../../store/record.js';
import type { IdempotencyRecord } from '../../store/types.js';
import type { NativeBatch } from './binding.js';
import { BlobBuilder, blobKey } from './blob.js';
import type { Bucket, BucketSet } from './bucket-set.js';

/** A copy of a key's record: in blob `blob` of `bucket`, under its own key (0), or still buffered (-1). */
export interface Located {
  readonly record: IdempotencyRecord;
  readonly bucket: Bucket;
  readonly blob: number;
}

/** The newest state of a key, not yet written to RocksDB. */
export interface Pending {
  readonly hash: number;
  /** The record to write into `bucket`; undefined when the key is deleted. */
  readonly record: IdempotencyRecord | undefined;
  readonly bucket: Bucket | undefined;
  /** Copies on disk that the write supersedes (hidden by a tombstone, or replaced in their bucket). */
  readonly copies: readonly Located[];
}

/** Buffered changes reach RocksDB after at most this long, or sooner past FLUSH_MAX_PENDING. */
const FLUSH_INTERVAL_MS = 1_000;
const FLUSH_MAX_PENDING = 65_536;
/** Claims remembered for a read-free confirm (~150 bytes each). */
const MAX_CLAIMS = 100_000;
const NO_COPIES: readonly Located[] = [];

/**
 * Changes not yet written to RocksDB, and this instance's in-flight claims. Claims (with the WAL off, every
 * change) are written within FLUSH_INTERVAL_MS, on close, or never when confirmed first: a crash that forgets a
 * claim frees the id at once rather than at the end of its lease.
 */
export class WriteBuffer {
  readonly #pending = new Map<string, Pending>();
  /** In-flight claims this instance wrote, so `confirm` needs no read; oldest dropped past MAX_CLAIMS. */
  readonly #claims = new Map<string, Located>();
  /** When the oldest change is due (performance.now()); each operation checks it: awaited loops starve timers. */
  #dueAt: number | undefined;
  /** Whether a durable change (not a claim) may be buffered: else a WAL-on call skips the flush's pass. */
  #durable = false;
  #timer: NodeJS.Timeout | undefined;
  #error: unknown;

  constructor(
    /** True when durable changes are written before the call resolves (the `wal` option). */
    readonly wal: boolean,
    private readonly buckets: BucketSet,
    /** Runs a timed flush in the repository's operation order. */
    private readonly schedule: (flush: () => void) => Promise<unknown>,
  ) {}

  /** The key's buffered state, newer than anything on disk; undefined when nothing is buffered for it. */
  latest(key: string): Pending | undefined {
    return this.#pending.size > 0 ? this.#pending.get(key) : undefined;
  }

  /** The keys whose buffered change is a record (not a deletion), for a scan. */
  keys(): string[] {
    return [...this.#pending].flatMap(([key, change]) => (change.record === undefined ? [] : [key]));
  }

  /** The claim this instance wrote for the key and has not changed since: then the only copy. */
  claim(key: string): Located | undefined {
    const claim = this.#claims.size > 0 ? this.#claims.get(key) : undefined;
    return claim !== undefined && !claim.bucket.dropped ? claim : undefined;
  }

  /** Whether a durable change can skip the buffer (`writeNow`): WAL on and nothing buffered to merge with. */
  get direct(): boolean {
    return this.wal && this.#pending.size === 0;
  }

  /** Writes a call's changes at once (see `direct`). */
  writeNow(write: DirectWrite): void {
    this.#write(write.keys, write.changes, write);
    if (this.#claims.size > 0) {
      for (const key of write.keys) this.#claims.delete(key);
      for (const key of write.freshKeys) this.#claims.delete(key);
    }
  }

  /** Buffers the key's newest state: `record` in `bucket` (both undefined: deleted), superseding `copies`. */
  put(
    key: string,
    hash: number,
    record: IdempotencyRecord | undefined,
    bucket: Bucket | undefined,
    copies: readonly Located[] | undefined,
  ): void {
    if (record?.state !== 'in-flight') this.#durable = true;
    this.#pending.set(key, { hash, record, bucket, copies: this.#onDisk(key, copies) });
  }

  /** Takes the key's buffered claim when `owner` holds it, for a confirmation written at once: never written. */
  takeClaim(key: string, owner: string): Pending | undefined {
    if (this.#pending.size === 0) return undefined;
    const pending = this.#pending.get(key);
    if (pending?.record?.state !== 'in-flight' || pending.record.owner !== owner) return undefined;
    this.#pending.delete(key);
    if (this.#pending.size === 0) this.#dueAt = undefined;
    return pending;
  }

  /** Writes what must be written now (see the class comment) and arms the timer for the rest. */
  afterWrite(): void {
    const full = this.#pending.size >= FLUSH_MAX_PENDING;
    if ((this.wal && this.#durable) || full) {
      try {
        this.flush(!full);
      } catch (error) {
        // The call fails, so its changes must not linger in memory as if they had been stored.
        if (this.wal) {
          this.#pending.clear();
          this.#durable = false;
        }
        throw error;
      }
    }
    if (this.#pending.size === 0) return;
    this.#dueAt ??= performance.now() + FLUSH_INTERVAL_MS;
    if (this.#timer === undefined) {
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        this.schedule(() => this.flush()).catch((error: unknown) => {
          this.#error ??= error;
        });
      }, FLUSH_INTERVAL_MS).unref();
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

  /** Writes buffered changes (with `durableOnly`, not the claims); what a failed write did not store stays. */
  flush(durableOnly = false): void {
    if (this.#pending.size === 0) {
      this.#dueAt = undefined;
      this.#durable = false;
      return;
    }
    const keys: string[] = [];
    const changes: Pending[] = [];
    for (const [key, change] of this.#pending) {
      if (durableOnly && change.record?.state === 'in-flight') continue;
      keys.push(key);
      changes.push(change);
    }
    let placed: Int32Array;
    try {
      placed = this.#write(keys, changes);
    } catch (error) {
      // Part of it may have been written: the remembered claims can no longer be trusted.
      this.#claims.clear();
      throw error;
    }
    // Everything written (the usual case): one clear instead of a delete per key.
    const all = keys.length === this.#pending.size;
    if (all) this.#pending.clear();
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const change = changes[i] as Pending;
      if (!all) this.#pending.delete(key);
      if (this.#claims.size > 0) this.#claims.delete(key);
      if (change.record?.state === 'in-flight' && change.bucket !== undefined) {
        this.#claims.set(key, { record: change.record, bucket: change.bucket, blob: placed[i] as number });
      }
    }
    while (this.#claims.size > MAX_CLAIMS) this.#claims.delete(this.#claims.keys().next().value as string);
    // What stays buffered now is in-flight claims only (durableOnly), or nothing.
    this.#durable = false;
    if (this.#pending.size === 0) this.#dueAt = undefined;
  }

  /** Stops the timer; what is buffered stays (close flushes it, clear discards it). */
  stop(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  discard(): void {
    this.stop();
    this.#pending.clear();
    this.#claims.clear();
    this.#dueAt = undefined;
    this.#durable = false;
  }

  /**
   * Writes changes to RocksDB; returns where each record went (blob number, 0 under its own key, -1 nowhere). A
   * superseded copy in another bucket is hidden by a tombstone there, written after the records: a crash in
   * between leaves an extra copy, never none. Index entries of superseded copies stay until their bucket drops.
   */
  #write(keys: readonly string[], changes: readonly Pending[], fresh?: DirectWrite): Int32Array {
    const records: Phase = { number: 0, writes: new Map() };
    const tombstones: Phase = { number: 1, writes: new Map() };
    const placed = new Int32Array(changes.length).fill(-1);
    const encode = valueEncoder();
    const into = fresh?.bucket;
    if (fresh !== undefined && into !== undefined && fresh.freshKeys.length > 0 && !into.dropped) {
      const { freshKeys, freshHashes, freshValues } = fresh;
      const writes = writesOf(records, into);
      for (let i = 0; i < freshKeys.length; i++) {
        addEntry(this.buckets, writes, freshHashes[i] as number, freshKeys[i] as string, freshValues[i]);
      }
    }
    for (let i = 0; i < changes.length; i++) {
      const key = keys[i] as string;
      const change = changes[i] as Pending;
      const { hash, record, bucket } = change;
      let target: Bucket | undefined;
      if (record !== undefined && bucket !== undefined && !bucket.dropped) {
        target = bucket;
        placed[i] = addEntry(this.buckets, writesOf(records, bucket), hash, key, encode(record));
      }
      for (const copy of change.copies) {
        const at = copy.bucket;
        if (at.dropped || copy.blob < 0) continue;
        if (at === target) {
          // The new record is newer than any copy in its own bucket; only a copy under the key itself
          // would win over a blob, so it goes (in the same write batch).
          if (copy.blob === 0 && (placed[i] as number) > 0) writesOf(records, at).batch.del(key);
        } else {
          addEntry(this.buckets, writesOf(tombstones, at), hash, key);
          if (copy.blob === 0 && at.indexed) writesOf(tombstones, at).batch.del(key);
        }
      }
    }
    for (const phase of [records, tombstones]) {
      for (const writes of phase.writes.values()) {
        if (writes.blob !== undefined && writes.blob.count > 0) putBlob(writes, writes.blob);
      }
    }
    for (const phase of [records, tombstones]) {
      for (const writes of phase.writes.values()) {
        writes.batch.write();
        // Written: a duplicate of these ids is checked against the bytes in memory (blobs are never rewritten).
        const { slot } = writes.bucket;
        for (const [number, bytes] of writes.blobs) this.buckets.recent.add(slot, number, bytes);
      }
    }
    return placed;
  }

  /** The copies on disk a new change supersedes: those just found, and those an older buffered change had. */
  #onDisk(key: string, copies: readonly Located[] | undefined): readonly Located[] {
    const earlier = this.#pending.get(key)?.copies ?? NO_COPIES;
    if ((copies === undefined || copies.length === 0) && earlier.length === 0) return NO_COPIES;
    const all: Located[] = [...earlier];
    for (const copy of copies ?? NO_COPIES) if (copy.blob >= 0) all.push(copy);
    return all;
  }
}

/**
 * What one call writes at once (`writeNow`): changes, each superseding its copies, and fresh records into `bucket`
 * of keys with no copy stored or buffered, as parallel arrays (no object per id; equal values may share a buffer).
 */
export class DirectWrite {
  bucket: Bucket | undefined;
  readonly keys: string[] = [];
  readonly changes: Pending[] = [];
  readonly freshKeys: string[] = [];
  readonly freshHashes: number[] = [];
  readonly freshValues: Buffer[] = [];

  change(key: string, change: Pending): void {
    this.keys.push(key);
    this.changes.push(change);
  }

  fresh(key: string, hash: number, value: Buffer): void {
    this.freshKeys.push(key);
    this.freshHashes.push(hash);
    this.freshValues.push(value);
  }
}

/** The RocksDB writes of one bucket in one phase: a write batch, the blob being filled and the blobs put. */
interface BucketWrites {
  readonly bucket: Bucket;
  readonly batch: NativeBatch;
  blob: BlobBuilder | undefined;
  readonly blobs: [number, Buffer][];
}

function putBlob(writes: BucketWrites, blob: BlobBuilder): void {
  const bytes = blob.encode();
  writes.batch.put(blobKey(blob.number), bytes);
  writes.blobs.push([blob.number, bytes]);
}

/** Adds a record (a tombstone: `value` undefined) to the current blob, or under the key (0); returns where. */
function addEntry(
  buckets: BucketSet,
  writes: BucketWrites,
  hash: number,
  key: string,
  value?: Buffer,
): number {
  const bucket = writes.bucket;
  if (bucket.indexed) {
    let blob = writes.blob;
    if (blob === undefined || blob.full) {
      if (blob !== undefined) putBlob(writes, blob);
      blob = new BlobBuilder(++bucket.lastBlob);
      writes.blob = blob;
    }
    // Past the highest blob number the index can name, noteKey fails and the bucket stops being indexed.
    if (buckets.noteKey(hash, bucket, blob.number)) {
      blob.add(hash, key, value);
      return blob.number;
    }
  }
  // An empty value is a tombstone: it hides copies of the key in this bucket's blobs.
  writes.batch.put(key, value ?? EMPTY);
  return 0;
}

const EMPTY = Buffer.alloc(0);

/** The writes of one phase (records first, then tombstones), by bucket. */
interface Phase {
  readonly number: number;
  readonly writes: Map<Bucket, BucketWrites>;
}

function writesOf(phase: Phase, bucket: Bucket): BucketWrites {
  let writes = phase.writes.get(bucket);
  if (writes === undefined) {
    let batch = bucket.batches[phase.number];
    if (batch === undefined) {
      batch = bucket.db.batch();
      bucket.batches[phase.number] = batch;
    }
    // What a failed write before left in the batch (encoding threw before it was written) must not go along.
    if (batch.count > 0) batch.clear();
    writes = { bucket, batch, blob: undefined, blobs: [] };
    phase.writes.set(bucket, writes);
  }
  return writes;
}

/** Encodes records, reusing the previous bytes when equal (compare every field `encodeRecord` writes). */
export function valueEncoder(): (record: IdempotencyRecord) => Buffer {
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
      record.result !== last.result ||
      record.firstSeenAt !== last.firstSeenAt
    ) {
      last = record;
      bytes = Buffer.from(encodeRecord(record));
    }
    return bytes;
  };
}
