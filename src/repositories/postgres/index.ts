import { storeModule } from '../module.js';
import { postgresOptionsSchema } from './options.js';
import { PostgresRepository } from './postgres-repository.js';

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
  type PostgresOptions,
  type PostgresRepositoryOptions,
  parsePostgresOptions,
  postgresDefaults,
  postgresOptionsSchema,
} from './options.js';
export {
  type PostgresLogger,
  type PostgresOpenExtras,
  type PostgresOpenOptions,
  PostgresRepository,
  type PostgresTransactionClient,
  postgresTransaction,
} from './postgres-repository.js';

/** Selected by `repository.type = "postgres"`. */
export const repositoryModule = storeModule('postgres', postgresOptionsSchema, (options) =>
  PostgresRepository.open(options),
);

export type { PurgeOptions } from '../sql/store.js';
