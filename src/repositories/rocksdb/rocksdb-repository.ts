import { ConfigError, errorMessage, RepositoryError } from '../../errors.js';
import { BaseRepository, type KeyedClaim, type KeyedEntry, SCAN_PAGE } from '../../store/base.js';
import { MAX_ID_BYTES } from '../../store/ids.js';
import {
  confirmedRecord,
  decodeRecord,
  encodeRecord,
  forgetAt,
  hasOwnFields,
  isClaimOf,
  isLive,
  newRecord,
  renewedRecord,
  storeLifetimeMs,
} from '../../store/record.js';
import type {
  AddOptions,
  AddResult,
  IdempotencyRecord,
  MarkOptions,
  RepositoryCapabilities,
} from '../../store/types.js';
import { ifLive } from '../shared.js';
import { loadRocksdbBinding } from './binding.js';
import { blobEntries, blobKey, blobNumber, findInBlob, type RecentBlobs } from './blob.js';
import { type Bucket, BucketSet } from './bucket-set.js';
import { hashKey } from './key-index.js';
import { parseRocksdbOptions, type RocksdbRepositoryOptions } from './options.js';
import { loadBuckets, removeIndex, type StartupSummary, saveIndex } from './startup.js';
import { openStoreDirectory, type StoreDirectory } from './store-directory.js';
import { DirectWrite, type Located, valueEncoder, WriteBuffer } from './write-buffer.js';

/** Diagnostics of an open store. */
export interface RocksdbStats {
  readonly index: { readonly enabled: boolean; readonly entries: number; readonly bytes: number };
  /** How the key index was filled when the store opened. */
  readonly startup: StartupSummary;
  /** Key index snapshots written while the store ran (`indexSnapshotKeys`), since it opened. */
  readonly snapshots: number;
  readonly buckets: readonly {
    readonly name: string;
    readonly deadline: number;
    readonly indexed: boolean;
    readonly estimatedKeys: number;
  }[];
}

/**
 * The embedded default store (docs/rocksdb.md): RocksDB time buckets on disk and an in-memory key index,
 * one process at a time. Operations run one after another (`#serial`), which makes check-and-insert atomic.
 */
export class RocksdbRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: true,
    shared: false,
    maxIdBytes: MAX_ID_BYTES,
    nativeBatch: true,
    // Every record passes through the write buffer and the compactions: 1 MiB keeps those cheap.
    maxResultBytes: 1_048_576,
  };
  protected readonly storeName = 'rocksdb';
  /** Absolute directory of the store. */
  readonly path: string;
  readonly #buffer: WriteBuffer;
  #tail: Promise<unknown> = Promise.resolve();
  #startup: StartupSummary = { snapshot: false, fromSnapshot: 0, caughtUp: 0, rescanned: 0 };
  /** `indexSnapshotKeys`; infinite when the index is saved on close only. */
  #snapshotKeys = Number.POSITIVE_INFINITY;
  #snapshotTimer: NodeJS.Timeout | undefined;
  /** performance.now() time of the next periodic snapshot: spaced after a save, later after a failed one. */
  #snapshotAt = 0;
  #snapshots = 0;
  /** Scratch space of index lookups. */
  readonly #slotScratch: number[] = [];
  readonly #blobScratch: number[] = [];

  private constructor(
    private readonly directory: StoreDirectory,
    private readonly buckets: BucketSet,
    wal: boolean,
    clock?: () => number,
  ) {
    super({ clock });
    this.path = directory.path;
    this.#buffer = new WriteBuffer(wal, buckets, (flush) => this.#serial(async () => flush()));
  }

  /**
   * Opens the store at `options.path`, creating it if the directory is missing or empty. Rejects with a
   * ConfigError naming the path when it cannot be used, a RepositoryError when another instance has it open.
   */
  static async open(options: RocksdbRepositoryOptions): Promise<RocksdbRepository> {
    const { clock, ...rest } = options;
    const settings = parseRocksdbOptions(rest);
    await loadRocksdbBinding(); // before anything touches the disk
    const directory = await openStoreDirectory(settings.path);
    const { path } = directory;
    const buckets = new BucketSet(path, settings);
    const repository = new RocksdbRepository(directory, buckets, settings.wal, clock);
    try {
      repository.#startup = await loadBuckets(buckets, path, repository.clock());
    } catch (error) {
      await repository.#closeDatabases().catch(() => undefined);
      if (error instanceof ConfigError || error instanceof RepositoryError) throw error;
      throw new RepositoryError(`rocksdb store ${path} could not be opened: ${errorMessage(error)}`, {
        cause: error,
      });
    }
    // The periodic key index snapshot, checked before every operation and by a timer (an idle store is saved
    // too): a process killed before it ever closes otherwise rescans every bucket at the next open.
    if (settings.indexSnapshotKeys > 0 && buckets.index.enabled) {
      repository.#snapshotKeys = settings.indexSnapshotKeys;
      repository.#snapshotTimer = setInterval(() => {
        if (repository.#snapshotDue()) repository.#serial(async () => undefined).catch(() => undefined);
      }, SNAPSHOT_CHECK_MS).unref();
    }
    return repository;
  }

  /** Whether the index is due a save (see `indexSnapshotKeys`): at most ~5 % of the store's time. */
  #snapshotDue(): boolean {
    const noted = this.buckets.notedSinceSnapshot;
    if (noted < this.#snapshotKeys || noted * 10 < this.buckets.index.size) return false;
    return performance.now() >= this.#snapshotAt;
  }

  /** Saves the key index (between operations: see saveIndex). A failure only delays the next try. */
  async #saveSnapshot(): Promise<void> {
    const noted = this.buckets.notedSinceSnapshot;
    this.buckets.notedSinceSnapshot = 0;
    const start = performance.now();
    try {
      await saveIndex(this.buckets, this.path);
      this.#snapshots++;
      const end = performance.now();
      this.#snapshotAt = end + SNAPSHOT_SPACING * (end - start);
    } catch {
      // The store works on without it; a restart after a kill only scans more.
      this.buckets.notedSinceSnapshot += noted;
      this.#snapshotAt = performance.now() + SNAPSHOT_RETRY_MS;
    }
  }

  /** Diagnostics: the buckets on disk and the size of the in-memory index. */
  stats(): RocksdbStats {
    this.assertOpen();
    const index = this.buckets.index;
    return {
      index: { enabled: index.enabled, entries: index.size, bytes: index.bytes },
      startup: this.#startup,
      snapshots: this.#snapshots,
      buckets: this.buckets.sorted().map((b) => ({
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
    return Object.fromEntries(this.buckets.sorted().map((b) => [b.name, b.db.property(name)]));
  }

  protected doAddMany(entries: readonly KeyedEntry[], options: AddOptions, now: number) {
    return this.#serial((wall) => this.#add(entries, options, now, wall));
  }

  /**
   * The lazy mark without a read: an id the key index knows no copy of goes straight into a blob, any other
   * (every id while a bucket is unindexed or changes are buffered) through `add`, so it is never blind.
   */
  protected override doMarkMany(entries: readonly KeyedEntry[], options: MarkOptions, now: number) {
    return this.#serial(async (wall) => {
      const buckets = this.buckets;
      const index = buckets.index;
      if (!this.#buffer.direct || !index.enabled || buckets.unindexed.length > 0) {
        return (await this.#add(entries, options, now, wall)).map((r) => r.added);
      }
      const results = new Array<boolean>(entries.length).fill(true);
      const write = new DirectWrite();
      let checked: number[] | undefined;
      // Every mark of one call has the same times; only an entry's own fields (fingerprint, result) differ.
      const bare = newRecord('', {}, options, now);
      const plain = Buffer.from(encodeRecord(bare));
      for (let i = 0; i < entries.length; i++) {
        const entry = entries[i] as KeyedEntry;
        const hash = hashKey(entry.key);
        if (index.lookup(hash, this.#slotScratch, this.#blobScratch) > 0 || this.#buffer.claim(entry.key)) {
          checked ??= [];
          checked.push(i);
          continue;
        }
        const own = hasOwnFields(entry, entry.result);
        const value = own ? Buffer.from(encodeRecord(newRecord(entry.key, entry, options, now))) : plain;
        write.fresh(entry.key, hash, value);
      }
      if (write.freshKeys.length > 0) {
        write.bucket = await buckets.bucketFor(storeLifetimeMs(bare, now, options.minLifetimeMs), wall);
        this.#buffer.writeNow(write);
      }
      if (checked !== undefined) {
        const rest = checked.map((i) => entries[i] as KeyedEntry);
        const added = await this.#add(rest, options, now, wall);
        for (let k = 0; k < checked.length; k++)
          results[checked[k] as number] = (added[k] as AddResult).added;
      }
      return results;
    });
  }

  /** `add` of unique keys, run in the operation order (see `#serial`). */
  async #add(entries: readonly KeyedEntry[], options: AddOptions, now: number, wall: number) {
    const keys = entries.map((e) => e.key);
    const hashes = new Uint32Array(keys.length);
    const found = await this.#locate(keys, hashes, now);
    const results = new Array<AddResult>(entries.length);
    // Durable records with nothing buffered are written at once, without a trip through the buffer's map.
    const write = this.#buffer.direct && options.leaseMs === undefined ? new DirectWrite() : undefined;
    const encode = valueEncoder();
    let bucket: Bucket | undefined;
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as KeyedEntry;
      const copies = found[i];
      const existing = copies?.[0];
      if (existing !== undefined && isLive(existing.record, now)) {
        results[i] = { added: false, existing: existing.record };
        continue;
      }
      const record = newRecord(entry.key, entry, options, now);
      // Every new record of one call has the same times, hence the same bucket.
      bucket ??= await this.buckets.bucketFor(storeLifetimeMs(record, now, options.minLifetimeMs), wall);
      const hash = hashes[i] as number;
      if (write === undefined) this.#buffer.put(entry.key, hash, record, bucket, copies);
      else if (copies === undefined) write.fresh(entry.key, hash, encode(record));
      else write.change(entry.key, { hash, record, bucket, copies });
      results[i] = { added: true, record };
    }
    if (write === undefined) {
      this.#buffer.afterWrite();
    } else if (bucket !== undefined) {
      write.bucket = bucket;
      this.#buffer.writeNow(write);
    }
    return results;
  }

  protected doGetMany(keys: readonly string[], now: number): Promise<(IdempotencyRecord | undefined)[]> {
    return this.#serial(async () => {
      const found = await this.#locate(keys, new Uint32Array(keys.length), now);
      return found.map((copies) => ifLive(copies?.[0]?.record, now));
    });
  }

  protected doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number, now: number): Promise<boolean[]> {
    return this.#serial(async (wall) => {
      const results = new Array<boolean>(claims.length);
      // The usual case, this instance's claim still buffered, is confirmed by one write without a lookup (bare
      // records of one first-seen time share one encoding); the rest take the general path.
      let rest: number[] | undefined;
      if (this.#buffer.wal) {
        const write = new DirectWrite();
        const encode = valueEncoder();
        let plain: Buffer | undefined;
        let plainSeenAt: number | undefined;
        for (let i = 0; i < claims.length; i++) {
          const { key, owner, result } = claims[i] as KeyedClaim;
          const claim = this.#buffer.takeClaim(key, owner);
          if (claim === undefined) {
            rest ??= [];
            rest.push(i);
            continue;
          }
          const claimed = claim.record as IdempotencyRecord;
          results[i] = true;
          const own = hasOwnFields(claimed, result);
          if (
            !own &&
            plain !== undefined &&
            claimed.firstSeenAt === plainSeenAt &&
            claim.copies.length === 0
          ) {
            write.fresh(key, claim.hash, plain);
            continue;
          }
          const record = confirmedRecord(claimed, ttlMs, now, result);
          write.bucket ??= await this.buckets.bucketFor(storeLifetimeMs(record, now), wall);
          if (claim.copies.length > 0) {
            write.change(key, { hash: claim.hash, record, bucket: write.bucket, copies: claim.copies });
            continue;
          }
          const value = encode(record);
          if (!own) {
            plain = value;
            plainSeenAt = record.firstSeenAt;
          }
          write.fresh(key, claim.hash, value);
        }
        if (write.bucket !== undefined) this.#buffer.writeNow(write);
        if (rest === undefined) return results;
      }
      const pending = rest === undefined ? claims : rest.map((i) => claims[i] as KeyedClaim);
      // Like the other stores, a claim whose lease lapsed can still be confirmed while nobody retook it.
      const confirmed = await this.#rewrite(pending, now, wall, (current, { owner, result }) =>
        isClaimOf(current, owner) ? confirmedRecord(current, ttlMs, now, result) : undefined,
      );
      if (rest === undefined) return confirmed;
      for (let k = 0; k < rest.length; k++) results[rest[k] as number] = confirmed[k] as boolean;
      return results;
    });
  }

  /** Looks each key up and writes what `change` makes of its best record: the general path of confirm, renew, remove. */
  async #rewrite<T extends { readonly key: string }>(
    items: readonly T[],
    now: number,
    wall: number,
    change: Rewrite<T>,
  ): Promise<boolean[]> {
    const unique = [...new Set(items.map((item) => item.key))];
    const hashes = new Uint32Array(unique.length);
    const found = await this.#locate(unique, hashes, now);
    const view = new Map(unique.map((key, i) => [key, { hash: hashes[i] as number, copies: found[i] }]));
    const results: boolean[] = [];
    let bucket: Bucket | undefined;
    for (const item of items) {
      const key = item.key;
      const state = view.get(key) as { hash: number; copies: Located[] | undefined };
      const record = change(state.copies?.[0]?.record, item);
      results.push(record !== undefined);
      if (record === null) {
        this.#buffer.put(key, state.hash, undefined, undefined, state.copies);
        state.copies = undefined;
      } else if (record !== undefined) {
        bucket ??= await this.buckets.bucketFor(storeLifetimeMs(record, now), wall);
        this.#buffer.put(key, state.hash, record, bucket, state.copies);
        state.copies = [{ record, bucket, blob: -1 }];
      }
    }
    this.#buffer.afterWrite();
    return results;
  }

  protected override doRenew(key: string, owner: string, leaseMs: number, now: number): Promise<boolean> {
    return this.#rewriteOne(key, now, (current) =>
      isClaimOf(current, owner) ? renewedRecord(current, leaseMs, now) : undefined,
    );
  }

  protected doRemove(key: string, owner: string | undefined, now: number): Promise<boolean> {
    return this.#rewriteOne(key, now, (current) =>
      current !== undefined && (owner === undefined || isClaimOf(current, owner)) ? null : undefined,
    );
  }

  #rewriteOne(key: string, now: number, change: Rewrite<unknown>): Promise<boolean> {
    return this.#serial(async (wall) => (await this.#rewrite([{ key }], now, wall, change))[0] === true);
  }

  /**
   * Every record a `get` finds, live or not (the buffered changes, then each bucket's), each from the copy a lookup
   * picks. A page is one operation: writes go on between pages, and a close or clear never waits for the scan.
   */
  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    const page = <T>(read: (wall: number) => Promise<T>) =>
      this.run('scan', () =>
        this.#serial((wall) => {
          this.assertOpen();
          return read(wall);
        }),
      );
    // A change flushed meanwhile is found on disk below too (reported twice at worst).
    const buffered = await page(async () => this.#buffer.keys());
    for (let i = 0; i < buffered.length; i += SCAN_PAGE) {
      const candidates = buffered.slice(i, i + SCAN_PAGE).map((key) => ({ key, blob: -1 }));
      const records = await page((wall) => this.#pick(candidates, wall));
      if (records.length > 0) await onPage(records);
    }
    for (const bucket of await page(async () => this.buckets.sorted())) {
      let from: Buffer | undefined = Buffer.alloc(0);
      while (from !== undefined) {
        const start: Buffer = from;
        const read = await page((wall) => this.#scanBucket(bucket, start, wall));
        if (read.records.length > 0) await onPage(read.records);
        from = read.next;
      }
    }
  }

  /** The records of about SCAN_PAGE ids of a bucket from key `from` on, and the key to go on from. */
  async #scanBucket(bucket: Bucket, from: Buffer, now: number) {
    if (bucket.dropped) return { records: [], next: undefined };
    const found: ScanCandidate[] = [];
    let next: Buffer | undefined;
    rows: for await (const entries of bucket.db.entries({ gte: from }, SCAN_ROWS)) {
      for (const [key, value] of entries) {
        const blob = blobNumber(key);
        if (blob > 0) {
          for (const entry of blobEntries(value as Buffer)) {
            if (entry.value !== undefined) found.push({ key: entry.key, bucket, blob });
          }
        } else if (value !== undefined && value.length > 0) {
          found.push({ key: key.toString('utf8'), bucket, blob: 0 });
        }
        if (found.length >= SCAN_PAGE) {
          // The key right after this one: keys sort bytewise, so a zero byte appended is its successor.
          next = Buffer.concat([key, ZERO_BYTE]);
          break rows;
        }
      }
    }
    return { records: await this.#pick(found, now), next };
  }

  /** The record of each candidate whose copy is the one a lookup picks (blob -1: buffered), each key once. */
  async #pick(candidates: readonly ScanCandidate[], now: number): Promise<IdempotencyRecord[]> {
    const keys = [...new Set(candidates.map((c) => c.key))];
    const found = await this.#locate(keys, new Uint32Array(keys.length), now);
    const best = new Map(keys.map((key, i) => [key, found[i]?.[0]]));
    const records: IdempotencyRecord[] = [];
    for (const { key, bucket, blob } of candidates) {
      const copy = best.get(key);
      if (copy === undefined || copy.blob !== blob || (blob >= 0 && copy.bucket !== bucket)) continue;
      records.push(copy.record);
      best.delete(key);
    }
    return records;
  }

  protected doClear(): Promise<void> {
    return this.#serial(async () => {
      this.#buffer.discard();
      await this.buckets.destroyAll();
      await removeIndex(this.path);
    });
  }

  protected doClose(): Promise<void> {
    clearInterval(this.#snapshotTimer);
    return this.#serial(async () => {
      this.#buffer.stop();
      try {
        this.#buffer.flush();
        await this.buckets.settle();
        if (this.buckets.index.enabled) await saveIndex(this.buckets, this.path);
      } finally {
        await this.#closeDatabases();
      }
    }, true);
  }

  /** Runs operations one at a time in call order (`add` is atomic), after due writes and bucket drops. */
  #serial<T>(operation: (wall: number) => Promise<T>, closing = false): Promise<T> {
    const run = this.#tail.then(() => {
      // A failed background flush surfaces in the next call (close retries the flush itself).
      if (!closing) {
        const error = this.#buffer.takeError();
        if (error !== undefined) throw error;
        this.#buffer.flushIfDue();
        // Before the operation, so that the snapshot sees no write half done.
        if (this.#snapshotDue()) return this.#saveSnapshot().then(() => this.#start(operation));
      }
      return this.#start(operation);
    });
    this.#tail = run.catch(() => undefined);
    return run;
  }

  #start<T>(operation: (wall: number) => Promise<T>): Promise<T> {
    const wall = this.clock();
    this.buckets.dropExpired(wall);
    return operation(wall);
  }

  /**
   * Every stored copy of each key (live or not), best first: live, confirmed, later retention. Each bucket gives
   * its newest copy (two hold one only after a crash mid-move). Fills `hashes` with each key's hash.
   */
  async #locate(keys: readonly string[], hashes: Uint32Array, now: number) {
    const found = new Array<Located[] | undefined>(keys.length).fill(undefined);
    const buckets = this.buckets;
    const index = buckets.index;
    const unindexed = buckets.unindexed;
    const slots = this.#slotScratch;
    const blobs = this.#blobScratch;
    let reads: ReadPlan | undefined;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const hash = hashKey(key);
      hashes[i] = hash;
      const buffered = this.#buffer.latest(key);
      if (buffered !== undefined) {
        if (buffered.record !== undefined && buffered.bucket !== undefined) {
          found[i] = [{ record: buffered.record, bucket: buffered.bucket, blob: -1 }];
        }
        continue;
      }
      const claim = this.#buffer.claim(key);
      if (claim !== undefined) {
        // Written by this instance and not changed since, so this is the only copy.
        found[i] = [claim];
        continue;
      }
      const n = index.lookup(hash, slots, blobs);
      if (n === 0 && unindexed.length === 0) continue;
      reads ??= new ReadPlan(buckets.recent);
      const bytes = Buffer.from(key, 'utf8');
      for (let j = 0; j < n; j++) {
        const bucket = buckets.bySlot(slots[j] as number);
        // A bucket that is not indexed is read under the key below anyway.
        if (bucket !== undefined && (blobs[j] !== 0 || bucket.indexed))
          reads.want(i, bytes, bucket, blobs[j] as number);
      }
      for (const bucket of unindexed) reads.want(i, bytes, bucket, 0);
    }
    if (reads !== undefined) await reads.run(keys, hashes, found);
    for (const copies of found) if (copies !== undefined && copies.length > 1) sortBestFirst(copies, now);
    return found;
  }

  async #closeDatabases(): Promise<void> {
    const results = [
      ...(await this.buckets.closeAll()),
      ...(await Promise.allSettled([this.directory.release()])),
    ];
    const failed = results.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  }
}

/** What a rewrite makes of a key's best record: a record, null to delete it, undefined to leave it (false). */
type Rewrite<T> = (current: IdempotencyRecord | undefined, item: T) => IdempotencyRecord | null | undefined;

const SNAPSHOT_CHECK_MS = 5_000;
const SNAPSHOT_SPACING = 20;
const SNAPSHOT_RETRY_MS = 60_000;

/** Rows per iterator read of a scan: a row is one record or a blob of up to BLOB_ENTRIES. */
const SCAN_ROWS = 128;
const ZERO_BYTE = Buffer.from([0]);

/** Where a scan found a copy of a key: a blob (> 0) or the key itself (0) of a bucket, or the buffer (-1). */
interface ScanCandidate {
  readonly key: string;
  readonly bucket?: Bucket;
  readonly blob: number;
}

function sortBestFirst(copies: Located[], now: number): void {
  const rank = ({ record }: Located) =>
    (isLive(record, now) ? 2 : 0) + (record.state === 'confirmed' ? 1 : 0);
  copies.sort((a, b) => rank(b) - rank(a) || forgetAt(b.record) - forgetAt(a.record));
}

/** One RocksDB read: a blob (number > 0) or a record under its own key (0) of a bucket. */
interface Want {
  readonly position: number;
  readonly bytes: Buffer;
  readonly bucket: Bucket;
  readonly blob: number;
  /** Index of the key in its bucket's read; -1 for a blob kept in memory. */
  readonly slot: number;
  /** The blob's bytes when kept in memory ({@link RecentBlobs}). */
  readonly value: Buffer | undefined;
}

/** The reads one lookup needs, one MultiGet per bucket, each blob read once however many keys want it. */
class ReadPlan {
  readonly #wants: Want[] = [];
  readonly #byBucket = new Map<Bucket, { keys: Buffer[]; blobs: Map<number, number> }>();

  constructor(readonly recent: RecentBlobs) {}

  want(position: number, bytes: Buffer, bucket: Bucket, blob: number): void {
    const value = blob > 0 ? this.recent.get(bucket.slot, blob) : undefined;
    if (value !== undefined) {
      this.#wants.push({ position, bytes, bucket, blob, slot: -1, value });
      return;
    }
    let read = this.#byBucket.get(bucket);
    if (read === undefined) {
      read = { keys: [], blobs: new Map() };
      this.#byBucket.set(bucket, read);
    }
    let slot = blob > 0 ? read.blobs.get(blob) : undefined;
    if (slot === undefined) {
      slot = read.keys.length;
      read.keys.push(blob > 0 ? blobKey(blob) : bytes);
      if (blob > 0) read.blobs.set(blob, slot);
    }
    this.#wants.push({ position, bytes, bucket, blob, slot, value });
  }

  /** Reads everything wanted and adds each bucket's newest copy of each key to `found`. */
  async run(keys: readonly string[], hashes: Uint32Array, found: (Located[] | undefined)[]): Promise<void> {
    const wants = this.#wants;
    const values = new Map<Bucket, (Buffer | undefined | null)[]>();
    await Promise.all(
      [...this.#byBucket].map(async ([bucket, read]) => {
        const got = await bucket.db.getBuffers(read.keys);
        if (got.some((v) => v === null)) {
          throw new RepositoryError(`rocksdb read of ${bucket.db.location} was aborted`);
        }
        values.set(bucket, got);
      }),
    );
    // Wants come grouped by position; within a bucket, a record under the key beats any blob, and a later
    // blob an earlier one.
    let w = 0;
    while (w < wants.length) {
      const position = (wants[w] as Want).position;
      const key = keys[position] as string;
      const hash = hashes[position] as number;
      const newest = new Map<Bucket, { rank: number; text: string | undefined; blob: number }>();
      for (; w < wants.length && (wants[w] as Want).position === position; w++) {
        const want = wants[w] as Want;
        const value = want.value ?? (values.get(want.bucket) as (Buffer | undefined)[])[want.slot];
        if (value === undefined) continue;
        let text: string | undefined;
        if (want.blob === 0) {
          text = value.length === 0 ? undefined : value.toString('utf8');
        } else {
          const entry = findInBlob(value, hash, want.bytes);
          if (entry === undefined) continue;
          text = 'value' in entry ? entry.value : undefined;
        }
        const rank = want.blob === 0 ? Number.POSITIVE_INFINITY : want.blob;
        const best = newest.get(want.bucket);
        if (best === undefined || rank > best.rank) newest.set(want.bucket, { rank, text, blob: want.blob });
      }
      for (const [bucket, copy] of newest) {
        if (copy.text === undefined) continue; // deleted in this bucket
        const located = { record: decodeRecord(key, copy.text), bucket, blob: copy.blob };
        const copies = found[position];
        if (copies === undefined) found[position] = [located];
        else copies.push(located);
      }
    }
  }
}
