import { ConfigError, RepositoryError } from '../../errors.js';
import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../base.js';
import { MAX_ID_BYTES } from '../ids.js';
import { confirmedRecord, decodeRecord, forgetAt, isLive, newRecord, storeLifetimeMs } from '../record.js';
import type { AddOptions, AddResult, IdempotencyRecord, RepositoryCapabilities } from '../types.js';
import { errorMessage, loadRocksdbBinding } from './binding.js';
import { BucketSet } from './bucket-set.js';
import type { Bucket } from './buckets.js';
import { hashKey } from './key-index.js';
import { parseRocksdbOptions, type RocksdbRepositoryOptions } from './options.js';
import { loadBuckets, removeIndex, saveIndex } from './startup.js';
import { openStoreDirectory, type StoreDirectory } from './store-directory.js';
import { type Located, WriteBuffer } from './write-buffer.js';

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
    // RocksDB values may reach 4 GiB, but every record passes through the write buffer and the bucket
    // compactions; 1 MiB keeps those cheap.
    maxResultBytes: 1_048_576,
  };
  protected readonly storeName = 'rocksdb';
  /** Absolute directory of the store. */
  readonly path: string;
  readonly #directory: StoreDirectory;
  readonly #buckets: BucketSet;
  readonly #buffer: WriteBuffer;
  #tail: Promise<unknown> = Promise.resolve();

  private constructor(directory: StoreDirectory, buckets: BucketSet, wal: boolean, clock?: () => number) {
    super({ clock });
    this.path = directory.path;
    this.#directory = directory;
    this.#buckets = buckets;
    this.#buffer = new WriteBuffer(wal, (flush) => this.#serial(async () => flush()));
  }

  /**
   * Opens the store at `options.path`, creating it if the directory is missing or empty. Rejects with a
   * ConfigError naming the path when the directory cannot be used or is not a store (see `openStoreDirectory`),
   * and with a RepositoryError naming it when another process (or another instance in this one) has it open.
   */
  static async open(options: RocksdbRepositoryOptions): Promise<RocksdbRepository> {
    const { clock, ...rest } = options;
    const settings = parseRocksdbOptions(rest);
    // Before anything touches the disk: without the optional binding, nothing is created.
    await loadRocksdbBinding();
    const directory = await openStoreDirectory(settings.path);
    const { path } = directory;
    const buckets = new BucketSet(path, settings);
    const repository = new RocksdbRepository(directory, buckets, settings.wal, clock);
    try {
      await loadBuckets(buckets, path, repository.clock());
    } catch (error) {
      await repository.#closeDatabases().catch(() => undefined);
      if (error instanceof ConfigError || error instanceof RepositoryError) throw error;
      throw new RepositoryError(`rocksdb store ${path} could not be opened: ${errorMessage(error)}`, {
        cause: error,
      });
    }
    return repository;
  }

  /** Diagnostics: the buckets on disk and the size of the in-memory index. */
  stats(): RocksdbStats {
    this.assertOpen();
    const index = this.#buckets.index;
    return {
      index: { enabled: index.enabled, entries: index.size, bytes: index.bytes },
      buckets: this.#buckets.sorted().map((b) => ({
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
    return Object.fromEntries(this.#buckets.sorted().map((b) => [b.name, b.db.property(name)]));
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
        bucket ??= await this.#buckets.bucketFor(storeLifetimeMs(record, now, options.minLifetimeMs), wall);
        this.#put(entry.key, hashes[i] as number, record, bucket, found[i]);
        results[i] = { added: true, record };
      }
      this.#buffer.afterWrite();
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
      for (const { key, owner, result } of claims) {
        const state = view.get(key) as { hash: number; copies: Located[] | undefined };
        const current = state.copies?.[0]?.record;
        // Like the other stores, a claim whose lease lapsed can still be confirmed while nobody retook it.
        if (current === undefined || current.state !== 'in-flight' || current.owner !== owner) {
          results.push(false);
          continue;
        }
        const record = confirmedRecord(current, ttlMs, now, result);
        bucket ??= await this.#buckets.bucketFor(storeLifetimeMs(record, now), wall);
        this.#put(key, state.hash, record, bucket, state.copies);
        state.copies = [{ record, bucket }];
        results.push(true);
      }
      this.#buffer.afterWrite();
      return results;
    });
  }

  protected doRemove(key: string, owner: string | undefined, now: number): Promise<boolean> {
    return this.#serial(async () => {
      const [copies] = await this.#locate([key], new Uint32Array(1), now);
      const current = copies?.[0]?.record;
      if (current === undefined) return false;
      if (owner !== undefined && (current.state !== 'in-flight' || current.owner !== owner)) return false;
      this.#buffer.delete(key, copies as Located[]);
      this.#buffer.afterWrite();
      return true;
    });
  }

  protected doClear(): Promise<void> {
    return this.#serial(async () => {
      this.#buffer.discard();
      await this.#buckets.destroyAll();
      await removeIndex(this.path);
    });
  }

  protected doClose(): Promise<void> {
    return this.#serial(async () => {
      this.#buffer.stop();
      try {
        this.#buffer.flush();
        await this.#buckets.settle();
        if (this.#buckets.index.enabled) await saveIndex(this.#buckets, this.path);
      } finally {
        await this.#closeDatabases();
      }
    }, true);
  }

  /**
   * Runs operations one at a time, in call order: a lookup and the write that depends on it cannot interleave
   * with another operation, which is what makes `add` atomic. Buffered changes that are due are written and
   * expired buckets dropped first.
   */
  #serial<T>(operation: (wall: number) => Promise<T>, closing = false): Promise<T> {
    const run = this.#tail.then(() => {
      // A failed background flush surfaces in the next call (close retries the flush itself).
      if (!closing) {
        const error = this.#buffer.takeError();
        if (error !== undefined) throw error;
        this.#buffer.flushIfDue();
      }
      const wall = this.clock();
      this.#buckets.dropExpired(wall);
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
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const hash = hashKey(key);
      hashes[i] = hash;
      const buffered = this.#buffer.latest(key);
      if (buffered !== undefined) {
        // Not yet written, and newer than anything on disk.
        if (buffered.record !== undefined && buffered.bucket !== undefined) {
          found[i] = [{ record: buffered.record, bucket: buffered.bucket }];
        }
        continue;
      }
      const claim = this.#buffer.claim(key);
      if (claim !== undefined) {
        // Written by this instance and not changed since, so this is the only copy.
        found[i] = [claim];
        continue;
      }
      this.#buckets.collectReads(hash, i, reads);
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
    this.#buffer.put(key, record, bucket, copies);
    // Indexed before it is written, so a lookup can never miss it.
    this.#buckets.noteKey(hash, bucket);
  }

  async #closeDatabases(): Promise<void> {
    const results = [
      ...(await this.#buckets.closeAll()),
      ...(await Promise.allSettled([this.#directory.release()])),
    ];
    const failed = results.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  }
}

function rank(record: IdempotencyRecord, now: number): number {
  return (isLive(record, now) ? 2 : 0) + (record.state === 'confirmed' ? 1 : 0);
}

function sortBestFirst(copies: Located[], now: number): void {
  copies.sort((a, b) => rank(b.record, now) - rank(a.record, now) || forgetAt(b.record) - forgetAt(a.record));
}
