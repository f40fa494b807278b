import { z } from 'zod';
import { storeOptionsParser } from '../shared.js';

/** Defaults of the RocksDB repository, written once. */
export const rocksdbDefaults = {
  /**
   * Coarsest bucket: ids are filed by the time they may be forgotten, one RocksDB directory per bucket, and a
   * bucket is deleted whole once its end has passed. Shorter lifetimes get finer buckets (see docs/rocksdb.md).
   */
  bucketMs: 3_600_000,
  /**
   * Write marks, confirmations and removals to RocksDB before the call resolves (false: buffer them in memory
   * for up to a second). Unconfirmed claims are buffered either way.
   */
  wal: true,
  /** RocksDB bloom filter bits per key in every table file; 0 turns the filter off (benchmarks only). */
  bloomBitsPerKey: 10,
  /** RocksDB block cache per bucket, in MiB. */
  blockCacheMb: 8,
  /** Memory cap of the in-process key index, in MiB; 0 turns it off and every lookup reads RocksDB. */
  indexMaxMb: 256,
  /**
   * The key index is also saved while the store runs, once this many ids (and a tenth of the index) were indexed
   * since the last save (at most ~5 % of the store's time): a killed process then rescans only what was written
   * since. 0: saved on a graceful close only.
   */
  indexSnapshotKeys: 1_000_000,
} as const;

/** Config schema for `repository.type = "rocksdb"`. */
export const rocksdbOptionsSchema = z
  .object({
    /** Directory of the store; created if missing. One process at a time. */
    path: z.string().min(1),
    bucketMs: z.number().int().min(1).default(rocksdbDefaults.bucketMs),
    wal: z.boolean().default(rocksdbDefaults.wal),
    bloomBitsPerKey: z.number().int().min(0).max(64).default(rocksdbDefaults.bloomBitsPerKey),
    blockCacheMb: z.number().int().min(0).max(4095).default(rocksdbDefaults.blockCacheMb),
    indexMaxMb: z.number().int().min(0).default(rocksdbDefaults.indexMaxMb),
    indexSnapshotKeys: z.number().int().min(0).default(rocksdbDefaults.indexSnapshotKeys),
    /**
     * Ids the store is expected to hold at once: the key index is sized for them when the store opens, so it
     * never grows (rehashes its tables) on the hot path while holding up to that many. Capped by `indexMaxMb`.
     */
    expectedIds: z.number().int().min(0).optional(),
    /**
     * RocksDB memtable budget per bucket written to, in MiB: memtables of a quarter of it (RocksDB's "level"
     * preset; ~3/4 of it in use, at most 3/2). Unset: RocksDB's own 64 MiB memtables, two at most.
     * `idem dedup` sets 32 unless the config does.
     */
    memtableMb: z.number().int().min(1).max(4096).optional(),
  })
  .strict();

/** Options as validated, with every default filled in. */
export type RocksdbOptions = z.output<typeof rocksdbOptionsSchema>;

/** Options of {@link RocksdbRepository}. */
export type RocksdbRepositoryOptions = z.input<typeof rocksdbOptionsSchema> & { clock?: () => number };

/** Validates options given in code (defaults filled in); a bad one is a ConfigError naming the option. */
export const parseRocksdbOptions = storeOptionsParser(rocksdbOptionsSchema, 'RocksdbRepository.open(...)');

/** @deprecated Renamed {@link RocksdbOptions} (every store's parsed options are `<Store>Options`). */
export type RocksdbSettings = RocksdbOptions;
