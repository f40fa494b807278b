import { mkdir, readdir, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { ConfigError, RepositoryError } from '../../errors.js';
import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../base.js';
import { MAX_ID_BYTES } from '../ids.js';
import { confirmedRecord, decodeRecord, encodeRecord, isLive, newRecord } from '../record.js';
import type { AddOptions, AddResult, IdempotencyRecord, RepositoryCapabilities } from '../types.js';
import { type NativeBatch, NativeDb, type NativeError, type NativeOpenOptions } from './binding.js';
import { Bucket, bucketDeadline, bucketWidth, parseBucketDir, removeDir, TRASH_PREFIX } from './buckets.js';
import { readIndexFile, removeIndexFile, type SnapshotBucket, writeIndexFile } from './index-file.js';
import { hashKey, KeyIndex, MAX_SLOT } from './key-index.js';
import { parseRocksdbOptions, type RocksdbRepositoryOptions, type RocksdbSettings } from './options.js';

/** A stored copy of a key's record and the bucket that holds it. */
interface Located {
  readonly record: IdempotencyRecord;
  readonly bucket: Bucket;
}

/** The newest state of a key, not yet written to RocksDB. */
interface Pending {
  /** The record to put into `bucket`; undefined when the key is deleted. */
  readonly record: IdempotencyRecord | undefined;
  readonly bucket: Bucket | undefined;
  /** Buckets holding an older copy, from which the key is deleted. */
  readonly stale: readonly Bucket[];
}

/** Diagnostics of an open store. */
export interface RocksdbStats {
  readonly index: { readonly enabled: boolean; readonly entries: number; readonly bytes: number };
  readonly buckets: readonly {
    readonly name: string;
    readonly deadline: number;
    readonly indexed: boolean;
    readonly estimatedKeys: number;
  }[];
}

/** With `wal: false`, buffered changes reach RocksDB after at most this long, or sooner past FLUSH_MAX_PENDING. */
const FLUSH_INTERVAL_MS = 1_000;
const FLUSH_MAX_PENDING = 65_536;
/** Claims remembered for a read-free confirm (~150 bytes each). */
const MAX_CLAIMS = 100_000;
const INDEX_FILE = 'index.bin';
/** A small database that exists to hold RocksDB's LOCK on the store for as long as it is open. */
const META_DIR = 'meta';
const NO_BUCKETS: readonly Bucket[] = [];

/**
 * The embedded default store: RocksDB on local disk, one process at a time.
 *
 * Records are filed in time buckets, one RocksDB database per bucket, by when they may be forgotten; a bucket
 * whose end has passed is deleted as a directory, never key by key. An in-memory key index (hash -> bucket)
 * answers most lookups of new ids without a disk read. All operations of one instance run one after another,
 * which makes check-and-insert atomic within the process; the RocksDB lock keeps other processes out.
 * See docs/rocksdb.md.
 */
export class RocksdbRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: true,
    shared: false,
    maxIdBytes: MAX_ID_BYTES,
    nativeBatch: true,
  };
  protected readonly storeName = 'rocksdb';
  /** Absolute directory of the store. */
  readonly path: string;
  readonly #settings: RocksdbSettings;
  readonly #bucketOptions: NativeOpenOptions;
  readonly #meta: NativeDb;
  readonly #index: KeyIndex;
  readonly #buckets = new Map<number, Bucket>();
  readonly #bySlot: (Bucket | undefined)[] = [];
  #unindexed: Bucket[] = [];
  #nextDeadline = Number.POSITIVE_INFINITY;
  readonly #pending = new Map<string, Pending>();
  /** In-flight claims this instance wrote, so `confirm` needs no read; oldest dropped past MAX_CLAIMS. */
  readonly #claims = new Map<string, Located>();
  #flushTimer: NodeJS.Timeout | undefined;
  #flushError: unknown;
  readonly #dropping = new Set<Promise<void>>();
  #tail: Promise<unknown> = Promise.resolve();
  readonly #slotScratch: number[] = [];

  private constructor(path: string, settings: RocksdbSettings, meta: NativeDb, clock?: () => number) {
    super({ clock });
    this.path = path;
    this.#settings = settings;
    this.#meta = meta;
    this.#index = new KeyIndex(settings.indexMaxMb * 1024 * 1024);
    this.#bucketOptions = {
      createIfMissing: true,
      compression: false,
      walCompression: false,
      cacheSize: settings.blockCacheMb * 1024 * 1024,
      optimize: 'point-lookup',
      filterPolicy: settings.bloomBitsPerKey > 0 ? `bloomfilter:${settings.bloomBitsPerKey}:false` : '',
    };
  }

  /**
   * Opens the store at `options.path`, creating it if needed. Rejects with a ConfigError naming the path when
   * the directory cannot be used, and with a RepositoryError naming it when another process (or another
   * instance in this one) has it open.
   */
  static async open(options: RocksdbRepositoryOptions): Promise<RocksdbRepository> {
    const { clock, ...rest } = options;
    const settings = parseRocksdbOptions(rest);
    const path = resolve(settings.path);
    try {
      await mkdir(path, { recursive: true });
    } catch (error) {
      throw new ConfigError(
        'repository.path',
        `cannot create the store directory ${path}: ${message(error)}`,
        {
          cause: error,
        },
      );
    }
    const meta = await openMeta(path);
    const repository = new RocksdbRepository(path, settings, meta, clock);
    try {
      await repository.#load();
    } catch (error) {
      await repository.#closeDatabases().catch(() => undefined);
      if (error instanceof ConfigError || error instanceof RepositoryError) throw error;
      throw new RepositoryError(`rocksdb store ${path} could not be opened: ${message(error)}`, {
        cause: error,
      });
    }
    return repository;
  }

  /** Diagnostics: the buckets on disk and the size of the in-memory index. */
  stats(): RocksdbStats {
    this.assertOpen();
    return {
      index: { enabled: this.#index.enabled, entries: this.#index.size, bytes: this.#index.bytes },
      buckets: this.#sortedBuckets().map((b) => ({
        name: b.name,
        deadline: b.deadline,
        indexed: b.indexed,
        estimatedKeys: Number(b.db.property('rocksdb.estimate-num-keys')),
      })),
    };
  }

  /** A RocksDB property (e.g. `rocksdb.block-cache-entry-stats`) of every bucket, by bucket name. */
  bucketProperty(name: string): Record<string, string> {
    this.assertOpen();
    return Object.fromEntries(this.#sortedBuckets().map((b) => [b.name, b.db.property(name)]));
  }

  protected doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    return this.#serial(async (wall) => {
      const keys = entries.map((e) => e.key);
      const hashes = new Uint32Array(keys.length);
      const found = await this.#locate(keys, hashes, now);
      const results = new Array<AddResult>(entries.length);
      let bucket: Bucket | undefined;
      for (let i = 0; i < entries.length; i++) {
        const entry = entries[i] as KeyedEntry;
        const existing = found[i]?.[0];
        if (existing !== undefined && isLive(existing.record, now)) {
          results[i] = { added: false, existing: existing.record };
          continue;
        }
        const record = newRecord(entry.key, entry, options, now);
        // Every new record of one call has the same times, hence the same bucket.
        bucket ??= await this.#bucketFor(retainUntil(record) - now, wall);
        this.#put(entry.key, hashes[i] as number, record, bucket, found[i]);
        results[i] = { added: true, record };
      }
      this.#afterWrite();
      return results;
    });
  }

  protected doGetMany(keys: readonly string[], now: number): Promise<(IdempotencyRecord | undefined)[]> {
    return this.#serial(async () => {
      const found = await this.#locate(keys, new Uint32Array(keys.length), now);
      return found.map((copies) => {
        const best = copies?.[0];
        return best !== undefined && isLive(best.record, now) ? best.record : undefined;
      });
    });
  }

  protected doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number, now: number): Promise<boolean[]> {
    return this.#serial(async (wall) => {
      const keys = [...new Set(claims.map((c) => c.key))];
      const hashes = new Uint32Array(keys.length);
      const found = await this.#locate(keys, hashes, now);
      const view = new Map(keys.map((key, i) => [key, { hash: hashes[i] as number, copies: found[i] }]));
      const results: boolean[] = [];
      let bucket: Bucket | undefined;
      for (const { key, owner } of claims) {
        const state = view.get(key) as { hash: number; copies: Located[] | undefined };
        const current = state.copies?.[0]?.record;
        // Like the other stores, a claim whose lease lapsed can still be confirmed while nobody retook it.
        if (current === undefined || current.state !== 'in-flight' || current.owner !== owner) {
          results.push(false);
          continue;
        }
        const record = confirmedRecord(current, ttlMs, now);
        bucket ??= await this.#bucketFor(retainUntil(record) - now, wall);
        this.#put(key, state.hash, record, bucket, state.copies);
        state.copies = [{ record, bucket }];
        results.push(true);
      }
      this.#afterWrite();
      return results;
    });
  }

  protected doRemove(key: string, owner: string | undefined, now: number): Promise<boolean> {
    return this.#serial(async () => {
      const [copies] = await this.#locate([key], new Uint32Array(1), now);
      const current = copies?.[0]?.record;
      if (current === undefined) return false;
      if (owner !== undefined && (current.state !== 'in-flight' || current.owner !== owner)) return false;
      this.#delete(key, copies as Located[]);
      this.#afterWrite();
      return true;
    });
  }

  protected doClear(): Promise<void> {
    return this.#serial(async () => {
      this.#cancelFlush();
      this.#pending.clear();
      this.#claims.clear();
      const buckets = [...this.#buckets.values()];
      for (const bucket of buckets) this.#unregister(bucket);
      this.#index.clear();
      await Promise.all([...buckets.map((b) => b.destroy(this.path)), ...this.#dropping]);
      await removeIndexFile(join(this.path, INDEX_FILE));
    });
  }

  protected doClose(): Promise<void> {
    return this.#serial(async () => {
      this.#cancelFlush();
      try {
        this.#flush();
        await Promise.all(this.#dropping);
        if (this.#index.enabled) await this.#saveIndex();
      } finally {
        await this.#closeDatabases();
      }
    }, true);
  }

  /**
   * Runs operations one at a time, in call order: a lookup and the write that depends on it cannot interleave
   * with another operation, which is what makes `add` atomic. Expired buckets are dropped first.
   */
  #serial<T>(operation: (wall: number) => Promise<T>, closing = false): Promise<T> {
    const run = this.#tail.then(() => {
      // A failed background flush surfaces in the next call (close retries the flush itself).
      if (this.#flushError !== undefined && !closing) {
        const error = this.#flushError;
        this.#flushError = undefined;
        throw error;
      }
      const wall = this.clock();
      this.#dropExpired(wall);
      return operation(wall);
    });
    this.#tail = run.catch(() => undefined);
    return run;
  }

  /**
   * Every stored copy of each key (live or not), best first: live before dead, confirmed before in-flight,
   * later retention first. Two copies exist only after a crash between writing a moved record and deleting
   * its old copy. Fills `hashes` with each key's hash.
   */
  async #locate(
    keys: readonly string[],
    hashes: Uint32Array,
    now: number,
  ): Promise<(Located[] | undefined)[]> {
    const found = new Array<Located[] | undefined>(keys.length).fill(undefined);
    const reads = new Map<Bucket, number[]>();
    const slots = this.#slotScratch;
    const pending = this.#pending.size > 0 ? this.#pending : undefined;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const hash = hashKey(key);
      hashes[i] = hash;
      const buffered = pending?.get(key);
      if (buffered !== undefined) {
        // Not yet written, and newer than anything on disk.
        if (buffered.record !== undefined && buffered.bucket !== undefined) {
          found[i] = [{ record: buffered.record, bucket: buffered.bucket }];
        }
        continue;
      }
      const claim = this.#claims.size > 0 ? this.#claims.get(key) : undefined;
      if (claim !== undefined && !claim.bucket.dropped) {
        // Written by this instance and not changed since, so this is the only copy.
        found[i] = [claim];
        continue;
      }
      const n = this.#index.lookup(hash, slots);
      for (let j = 0; j < n; j++) {
        const bucket = this.#bySlot[slots[j] as number];
        if (bucket !== undefined) addRead(reads, bucket, i);
      }
      for (const bucket of this.#unindexed) addRead(reads, bucket, i);
    }
    if (reads.size === 0) return found;
    await Promise.all(
      [...reads].map(async ([bucket, positions]) => {
        const values = await bucket.db.getMany(positions.map((i) => keys[i] as string));
        for (let j = 0; j < positions.length; j++) {
          const value = values[j];
          if (value === undefined) continue;
          if (value === null) throw new RepositoryError(`rocksdb read of ${bucket.db.location} was aborted`);
          const i = positions[j] as number;
          const copy = { record: decodeRecord(keys[i] as string, value), bucket };
          const copies = found[i];
          if (copies === undefined) found[i] = [copy];
          else copies.push(copy);
        }
      }),
    );
    for (const copies of found) if (copies !== undefined && copies.length > 1) sortBestFirst(copies, now);
    return found;
  }

  /** Buffers `record` as the key's newest state, in `bucket`; older copies elsewhere are deleted. */
  #put(
    key: string,
    hash: number,
    record: IdempotencyRecord,
    bucket: Bucket,
    copies: Located[] | undefined,
  ): void {
    this.#pending.set(key, { record, bucket, stale: this.#staleBuckets(key, copies, bucket) });
    // Indexed before it is written, so a lookup can never miss it.
    if (bucket.indexed && !this.#index.insert(hash, bucket.slot)) this.#markUnindexed(bucket);
  }

  /** Buffers the deletion of every copy of the key. */
  #delete(key: string, copies: Located[]): void {
    this.#pending.set(key, { record: undefined, bucket: undefined, stale: this.#staleBuckets(key, copies) });
  }

  #staleBuckets(key: string, copies: Located[] | undefined, keep?: Bucket): readonly Bucket[] {
    const earlier = this.#pending.get(key)?.stale ?? NO_BUCKETS;
    if (copies === undefined && earlier.length === 0) return NO_BUCKETS;
    const stale: Bucket[] = [];
    for (const bucket of [...(copies ?? []).map((c) => c.bucket), ...earlier]) {
      if (bucket !== keep && !stale.includes(bucket)) stale.push(bucket);
    }
    return stale.length > 0 ? stale : NO_BUCKETS;
  }

  /**
   * With the WAL on, confirmed records and deletions reach RocksDB before the call resolves. In-flight claims
   * (and, with the WAL off, every change) are buffered and written within FLUSH_INTERVAL_MS, on close, or never
   * when confirmed first: a claim dies with its owner's process anyway, and a crash that forgets it frees the
   * id at once rather than at the end of its lease.
   */
  #afterWrite(): void {
    const full = this.#pending.size >= FLUSH_MAX_PENDING;
    if (this.#settings.wal || full) {
      try {
        this.#flush(!full);
      } catch (error) {
        // The call fails, so its changes must not linger in memory as if they had been stored.
        if (this.#settings.wal) this.#pending.clear();
        throw error;
      }
    }
    if (this.#pending.size > 0 && this.#flushTimer === undefined) {
      this.#flushTimer = setTimeout(() => {
        this.#flushTimer = undefined;
        this.#serial(async () => this.#flush()).catch((error: unknown) => {
          this.#flushError ??= error;
        });
      }, FLUSH_INTERVAL_MS);
      this.#flushTimer.unref();
    }
  }

  #cancelFlush(): void {
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
  }

  /**
   * Writes buffered changes, one WriteBatch per bucket; with `durableOnly` (WAL on), in-flight claims stay
   * buffered. What a failed write did not store stays buffered.
   */
  #flush(durableOnly = false): void {
    if (this.#pending.size === 0) return;
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
  }

  /** The bucket for a record kept `lifetimeMs` longer, opened if new. Buckets are dated on the wall clock. */
  async #bucketFor(lifetimeMs: number, wall: number): Promise<Bucket> {
    if (!Number.isFinite(lifetimeMs)) throw new ConfigError('ttlMs', `must be a finite number of ms`);
    const lifetime = Math.max(0, lifetimeMs);
    const deadline = bucketDeadline(wall + lifetime, bucketWidth(lifetime, this.#settings.bucketMs));
    const existing = this.#buckets.get(deadline);
    if (existing !== undefined) return existing;
    const bucket = await this.#openBucket(deadline);
    bucket.slot = this.#freeSlot();
    bucket.indexed = bucket.slot !== 0 && this.#index.enabled;
    this.#register(bucket);
    return bucket;
  }

  async #openBucket(deadline: number): Promise<Bucket> {
    try {
      return await Bucket.open(this.path, deadline, this.#bucketOptions);
    } catch (error) {
      throw new RepositoryError(
        `rocksdb bucket ${join(this.path, `b-${deadline}`)} could not be opened: ${message(error)}`,
        { cause: error },
      );
    }
  }

  #dropExpired(wall: number): void {
    if (wall < this.#nextDeadline) return;
    for (const bucket of [...this.#buckets.values()]) {
      if (bucket.deadline > wall) continue;
      this.#unregister(bucket);
      // Deleting the directory is cleanup, not correctness: a failure leaves it for the next open to remove.
      const drop: Promise<void> = bucket
        .destroy(this.path)
        .catch(() => undefined)
        .finally(() => this.#dropping.delete(drop));
      this.#dropping.add(drop);
    }
  }

  #register(bucket: Bucket): void {
    this.#buckets.set(bucket.deadline, bucket);
    if (bucket.slot !== 0) this.#bySlot[bucket.slot] = bucket;
    if (!bucket.indexed) this.#unindexed.push(bucket);
    this.#nextDeadline = Math.min(this.#nextDeadline, bucket.deadline);
  }

  #unregister(bucket: Bucket): void {
    bucket.dropped = true;
    this.#buckets.delete(bucket.deadline);
    if (bucket.slot !== 0) {
      this.#bySlot[bucket.slot] = undefined;
      this.#index.removeSlot(bucket.slot);
    }
    this.#unindexed = this.#unindexed.filter((b) => b !== bucket);
    this.#nextDeadline = Math.min(Number.POSITIVE_INFINITY, ...[...this.#buckets.keys()]);
  }

  #markUnindexed(bucket: Bucket): void {
    bucket.indexed = false;
    this.#unindexed.push(bucket);
  }

  /** The lowest bucket slot not in use, or 0 (no index entries) past MAX_SLOT. */
  #freeSlot(): number {
    for (let slot = 1; slot <= MAX_SLOT; slot++) if (this.#bySlot[slot] === undefined) return slot;
    return 0;
  }

  #sortedBuckets(): Bucket[] {
    return [...this.#buckets.values()].sort((a, b) => a.deadline - b.deadline);
  }

  /**
   * Opens the buckets on disk (deleting expired ones and leftovers of interrupted deletes) and fills the key
   * index: from the snapshot of the last graceful close where a bucket is unchanged since, by scanning its
   * keys otherwise.
   */
  async #load(): Promise<void> {
    const wall = this.clock();
    const deadlines: number[] = [];
    for (const name of await readdir(this.path)) {
      const deadline = parseBucketDir(name);
      if (name.startsWith(TRASH_PREFIX)) await rm(join(this.path, name), { recursive: true, force: true });
      else if (deadline !== undefined && deadline <= wall) await removeDir(this.path, name);
      else if (deadline !== undefined) deadlines.push(deadline);
    }
    const opened = await Promise.allSettled(deadlines.map((d) => this.#openBucket(d)));
    const buckets = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const failed = opened.find((r) => r.status === 'rejected');
    if (failed !== undefined) {
      await Promise.allSettled(buckets.map((b) => b.db.close()));
      throw (failed as PromiseRejectedResult).reason;
    }

    const snapshot = this.#index.enabled ? await readIndexFile(join(this.path, INDEX_FILE)) : undefined;
    const restored =
      snapshot !== undefined &&
      this.#index.restore(snapshot.hashes, snapshot.slots, snapshot.live, snapshot.used);
    const known = new Map<string, SnapshotBucket>(restored ? snapshot.buckets.map((b) => [b.name, b]) : []);
    const rescan: Bucket[] = [];
    for (const bucket of buckets) {
      const saved = known.get(bucket.name);
      if (saved && saved.identity === bucket.db.identity && saved.sequence === bucket.db.sequence) {
        bucket.slot = saved.slot;
        bucket.indexed = saved.indexed;
        this.#register(bucket);
      } else {
        rescan.push(bucket);
      }
    }
    // Entries of buckets the snapshot knew but that are gone or changed are forgotten before slots are reused.
    for (const saved of known.values()) {
      if (this.#bySlot[saved.slot]?.name !== saved.name) this.#index.removeSlot(saved.slot);
    }
    for (const bucket of rescan) {
      bucket.slot = this.#freeSlot();
      bucket.indexed = bucket.slot !== 0 && this.#index.enabled;
      this.#register(bucket);
      if (bucket.indexed) await this.#scan(bucket);
    }
  }

  /** Indexes every key of the bucket; if the index fills up, the bucket is read on every lookup instead. */
  async #scan(bucket: Bucket): Promise<void> {
    for await (const keys of bucket.db.keys()) {
      for (const key of keys) {
        if (!this.#index.insert(hashKey(key), bucket.slot)) {
          this.#markUnindexed(bucket);
          return;
        }
      }
    }
  }

  async #saveIndex(): Promise<void> {
    const buckets = this.#sortedBuckets().map((b) => ({
      name: b.name,
      slot: b.slot,
      identity: b.db.identity,
      sequence: b.db.sequence,
      indexed: b.indexed,
    }));
    await writeIndexFile(join(this.path, INDEX_FILE), this.#index, buckets);
  }

  async #closeDatabases(): Promise<void> {
    const buckets = [...this.#buckets.values()];
    for (const bucket of buckets) bucket.dropped = true;
    const results = await Promise.allSettled([...buckets.map((b) => b.db.close()), this.#meta.close()]);
    const failed = results.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  }
}

/** Opens the store's lock-holding database; a held lock becomes an error naming the store path. */
async function openMeta(path: string): Promise<NativeDb> {
  const location = join(path, META_DIR);
  try {
    return await NativeDb.open(location, { createIfMissing: true, cacheSize: 0, walCompression: false });
  } catch (error) {
    if ((error as NativeError).code === 'LEVEL_LOCKED') {
      throw new RepositoryError(
        `rocksdb store ${path} is already open in another process or repository instance ` +
          `(RocksDB lock ${join(location, 'LOCK')}): ${message(error)}`,
        { cause: error, retryable: false },
      );
    }
    throw new ConfigError('repository.path', `cannot open the rocksdb store ${path}: ${message(error)}`, {
      cause: error,
    });
  }
}

/** When a record may be forgotten entirely: the later of its lease and its retention. */
function retainUntil(record: IdempotencyRecord): number {
  return Math.max(record.expiresAt, record.leaseExpiresAt ?? 0);
}

function rank(record: IdempotencyRecord, now: number): number {
  return (isLive(record, now) ? 2 : 0) + (record.state === 'confirmed' ? 1 : 0);
}

function sortBestFirst(copies: Located[], now: number): void {
  copies.sort(
    (a, b) => rank(b.record, now) - rank(a.record, now) || retainUntil(b.record) - retainUntil(a.record),
  );
}

function addRead(reads: Map<Bucket, number[]>, bucket: Bucket, position: number): void {
  const positions = reads.get(bucket);
  if (positions === undefined) reads.set(bucket, [position]);
  else if (positions[positions.length - 1] !== position) positions.push(position);
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
      record.fingerprint !== last.fingerprint
    ) {
      last = record;
      bytes = Buffer.from(encodeRecord(record));
    }
    return bytes;
  };
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
