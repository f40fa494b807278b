import { promisify } from 'node:util';
import { ConfigError, errorMessage } from '../../errors.js';

/**
 * The slice of `@nxtedition/rocksdb` 12.x's native addon this store uses, called directly: its abstract-level
 * class encodes every key and value per call and measured ~2x slower (bench/repositories/binding-choice.ts).
 */
interface NativeAddon {
  db_init(location: string): NativeHandle;
  db_open(db: NativeHandle, options: object, callback: (error: Error | null) => void): unknown;
  db_close(db: NativeHandle, callback: (error?: Error | null) => void): void;
  db_get_many(
    db: NativeHandle,
    keys: readonly Buffer[],
    options: object,
    callback: (error: Error | null, values: (Buffer | undefined | null)[]) => void,
  ): void;
  db_get_many_sync(db: NativeHandle, keys: readonly Buffer[], options: object): (Buffer | undefined | null)[];
  db_get_property(db: NativeHandle, property: string): string;
  db_get_latest_sequence(db: NativeHandle): number;
  db_get_identity(db: NativeHandle): string;
  iterator_init(db: NativeHandle, options: object): NativeHandle;
  iterator_nextv(
    iterator: NativeHandle,
    count: number,
    callback: (error: Error | null, result: { rows: unknown[]; finished: boolean }) => void,
  ): void;
  iterator_close(iterator: NativeHandle): void;
  batch_init(): NativeHandle;
  batch_put(batch: NativeHandle, key: Buffer, value: Buffer, options: object): void;
  batch_del(batch: NativeHandle, key: Buffer, options: object): void;
  batch_write(db: NativeHandle, batch: NativeHandle, options: object): void;
  batch_clear(batch: NativeHandle): void;
}

/** An opaque native object (database, iterator or write batch). */
type NativeHandle = { readonly __native: unique symbol };

/** The version the shapes above describe; package.json pins the optional dependency to it (a test checks). */
export const ROCKSDB_BINDING_VERSION = '12.2.12';

// A variable specifier keeps the compiler off the untyped file; import() works in the ESM and CommonJS builds.
const BINDING_MODULE = '@nxtedition/rocksdb/binding.js';

// Loaded by the first RocksdbRepository.open, before any NativeDb: importing the store never needs the package.
let addon: NativeAddon;

/** Loads the optional native addon once; its absence is a ConfigError that names the fix. */
export async function loadRocksdbBinding(): Promise<void> {
  if (addon !== undefined) return;
  try {
    const loaded = (await import(BINDING_MODULE)) as { default: NativeAddon };
    addon = loaded.default;
  } catch (error) {
    const { code } = (error ?? {}) as { code?: string };
    const problem =
      code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND'
        ? 'which is not installed'
        : `whose native binding could not be loaded (${errorMessage(error)})`;
    throw new ConfigError(
      'repository.type',
      `the rocksdb store needs the optional package @nxtedition/rocksdb, ${problem}: ` +
        `run \`npm install @nxtedition/rocksdb@${ROCKSDB_BINDING_VERSION}\`, or choose another store ` +
        '(`--store memory` for a one-shot run, or repository.type = "memory", "redis", ...)',
      { cause: error },
    );
  }
}

const NO_OPTIONS = {};
const BUFFER_VALUES = { valueEncoding: 'buffer', fillCache: false };
/**
 * Reads of up to this many keys run synchronously: the libuv pool's round trip cost more than the read for a
 * batch's ~100 duplicates (bench/repositories/binding-choice.ts). Larger reads stay off the event loop.
 */
const SYNC_READ_MAX = 256;

/** Open options understood by the addon (subset). */
export interface NativeOpenOptions {
  readonly createIfMissing?: boolean;
  readonly compression?: boolean;
  /** ZSTD for the WAL: on by default in the addon, which doubled the write cost here. */
  readonly walCompression?: boolean;
  /** Block cache in bytes; 0 means none. */
  readonly cacheSize?: number;
  /** `point-lookup`: hash index inside data blocks and a memtable bloom filter. */
  readonly optimize?: 'point-lookup';
  /** RocksDB filter policy string, e.g. `bloomfilter:10:false`; empty for none. */
  readonly filterPolicy?: string;
  /** With `compaction: 'level'`: memtables of a quarter of this many bytes, up to six (at least two merged per flush). */
  readonly memtableMemoryBudget?: number;
  readonly compaction?: 'level';
}

/** One open RocksDB database: MultiGet reads, synchronous WriteBatch writes (what the addon offers). */
export class NativeDb {
  #open = true;
  #busy = 0;
  #idle: (() => void) | undefined;
  readonly #getMany = promisify(addon.db_get_many); // made once: a promisify call costs ~4 µs

  private constructor(
    readonly location: string,
    private readonly db: NativeHandle,
  ) {}

  /** Opens (and by default creates) the database at `location`. Rejects with the addon's error. */
  static async open(location: string, options: NativeOpenOptions): Promise<NativeDb> {
    const db = addon.db_init(location);
    await promisify(addon.db_open)(db, options);
    return new NativeDb(location, db);
  }

  /** The values stored under `keys` as bytes (undefined where absent; null: aborted), with one MultiGet. */
  async getBuffers(keys: readonly Buffer[]): Promise<(Buffer | undefined | null)[]> {
    if (keys.length <= SYNC_READ_MAX) return addon.db_get_many_sync(this.db, keys, BUFFER_VALUES);
    this.#busy++;
    try {
      return await this.#getMany(this.db, keys, BUFFER_VALUES);
    } finally {
      this.#done();
    }
  }

  /** Every entry in key order, in chunks of `[key, value]` byte pairs (`values: false`: values undefined). */
  async *entries(
    options: { gte?: Buffer; lt?: Buffer; limit?: number; values?: boolean } = {},
    chunk = 1024,
  ): AsyncGenerator<[Buffer, Buffer | undefined][]> {
    // The addon takes an undefined option (gte, lt, limit) as absent.
    const iterator = addon.iterator_init(this.db, {
      ...options,
      keys: true,
      values: options.values ?? true,
      keyEncoding: 'buffer',
      valueEncoding: 'buffer',
    });
    const next = promisify(addon.iterator_nextv);
    this.#busy++;
    try {
      for (;;) {
        const { rows, finished } = await next(iterator, chunk);
        const pairs: [Buffer, Buffer | undefined][] = [];
        for (let i = 0; i < rows.length; i += 2) {
          pairs.push([rows[i] as Buffer, (rows[i + 1] ?? undefined) as Buffer | undefined]);
        }
        if (pairs.length > 0) yield pairs;
        if (finished) return;
      }
    } finally {
      addon.iterator_close(iterator);
      this.#done();
    }
  }

  batch(): NativeBatch {
    return new NativeBatch(this.db);
  }

  /** A RocksDB property such as `rocksdb.stats` or `rocksdb.block-cache-entry-stats`. */
  property(name: string): string {
    return addon.db_get_property(this.db, name);
  }

  /** The last sequence number written; it changes with every write, which dates an index snapshot. */
  get sequence(): number {
    return addon.db_get_latest_sequence(this.db);
  }

  /** The database's unique id, new for every directory RocksDB creates. */
  get identity(): string {
    return addon.db_get_identity(this.db);
  }

  /** Waits for in-flight reads, then closes (RocksDB syncs the WAL on close). Idempotent. */
  async close(): Promise<void> {
    if (!this.#open) return;
    this.#open = false;
    if (this.#busy > 0) await new Promise<void>((resolve) => (this.#idle = resolve));
    await promisify(addon.db_close)(this.db);
  }

  #done(): void {
    if (--this.#busy === 0 && this.#idle) this.#idle();
  }
}

// Keys go through one scratch buffer (a cached view per length): RocksDB copies the bytes into the batch at once.
const scratch = Buffer.allocUnsafe(8192);
const views: Buffer[] = [];

function keyBytes(key: string): Buffer {
  if (key.length * 3 > scratch.length) return Buffer.from(key, 'utf8');
  const length = scratch.write(key, 0, 'utf8');
  let view = views[length];
  if (view === undefined) {
    view = scratch.subarray(0, length);
    views[length] = view;
  }
  return view;
}

/** A RocksDB WriteBatch: puts and deletes applied atomically (within one database) by `write()`. */
export class NativeBatch {
  readonly #batch = addon.batch_init();
  #count = 0;

  constructor(private readonly db: NativeHandle) {}

  get count(): number {
    return this.#count;
  }

  /** A put under a key, or under bytes (a blob's key). */
  put(key: string | Buffer, value: Buffer): void {
    addon.batch_put(this.#batch, typeof key === 'string' ? keyBytes(key) : key, value, NO_OPTIONS);
    this.#count++;
  }

  del(key: string | Buffer): void {
    addon.batch_del(this.#batch, typeof key === 'string' ? keyBytes(key) : key, NO_OPTIONS);
    this.#count++;
  }

  /** Applies the batch and empties it, also when the write fails: a reused batch keeps RocksDB's buffer. */
  write(): void {
    if (this.#count === 0) return;
    try {
      addon.batch_write(this.db, this.#batch, NO_OPTIONS);
    } finally {
      this.clear();
    }
  }

  clear(): void {
    addon.batch_clear(this.#batch);
    this.#count = 0;
  }
}
