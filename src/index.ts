/**
 * idempotent-consumer: wrap an async handler so each message id is handled once, on a store chosen by config.
 * Stores have their own entry points (`idempotent-consumer/rocksdb`, `/redis`, `/dynamodb`, `/cassandra`,
 * `/memory`) so that only the client library you use is loaded.
 */
export * from './consumer/index.js';
export * from './errors.js';
export {
  type LocalCacheOptions,
  LocalCacheRepository,
  withLocalCache,
} from './repositories/local-cache.js';
export type { RepositoryModule } from './repositories/module.js';
export {
  BaseRepository,
  type BaseRepositoryOptions,
  type KeyedClaim,
  type KeyedEntry,
} from './store/base.js';
export { MAX_ID_BYTES, toKey } from './store/ids.js';
export { isLive } from './store/record.js';
export { isTransactional } from './store/transaction.js';
export type * from './store/types.js';
export { parseDuration } from './util/duration.js';
