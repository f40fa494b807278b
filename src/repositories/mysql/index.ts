import { storeModule } from '../module.js';
import { MySqlRepository } from './mysql-repository.js';
import { mysqlOptionsSchema } from './options.js';

/** The DDL and the migration, for teams that create tables through their own migrations (`idem migrate`). */
export {
  COLUMNS,
  type MigrateOptions,
  type MigrateResult,
  migrate,
  schemaScript,
  schemaStatements,
} from './migration.js';
export {
  type MySqlLogger,
  type MySqlOpenExtras,
  type MySqlOpenOptions,
  MySqlRepository,
  mysqlTransaction,
} from './mysql-repository.js';
export {
  type MySqlOptions,
  type MySqlRepositoryOptions,
  mysqlDefaults,
  mysqlOptionsSchema,
  parseMySqlOptions,
} from './options.js';
export type { MySqlTransaction } from './transaction.js';

/** Selected by `repository.type = "mysql"`. */
export const repositoryModule = storeModule('mysql', mysqlOptionsSchema, MySqlRepository.open);

export type { PurgeOptions } from '../sql/store.js';
