import { storeModule } from '../module.js';
import { rocksdbOptionsSchema } from './options.js';
import { RocksdbRepository } from './rocksdb-repository.js';

export {
  parseRocksdbOptions,
  type RocksdbOptions,
  type RocksdbRepositoryOptions,
  /** @deprecated Use RocksdbOptions. */
  type RocksdbSettings,
  rocksdbDefaults,
  rocksdbOptionsSchema,
} from './options.js';
export { RocksdbRepository, type RocksdbStats } from './rocksdb-repository.js';
export type { StartupSummary as RocksdbStartupSummary } from './startup.js';

/** Selected by `repository.type = "rocksdb"` (the default store). */
export const repositoryModule = storeModule('rocksdb', rocksdbOptionsSchema, RocksdbRepository.open);
