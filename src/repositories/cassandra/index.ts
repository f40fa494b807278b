import { storeModule } from '../module.js';
import { CassandraRepository } from './cassandra-repository.js';
import { cassandraOptionsSchema } from './options.js';

export {
  /** @deprecated Use CassandraOpenExtras. */
  type CassandraConnectExtras,
  type CassandraOpenExtras,
  CassandraRepository,
} from './cassandra-repository.js';
export type { CassandraLogger } from './connection.js';
/** The DDL `createSchema` runs, for teams that create tables through migrations instead. */
export { BUCKETS, schemaStatements } from './cql.js';
export {
  type CassandraOptions,
  type CassandraRepositoryOptions,
  cassandraDefaults,
  cassandraOptionsSchema,
  parseCassandraOptions,
} from './options.js';

/** Selected by `repository.type = "cassandra"`. */
export const repositoryModule = storeModule('cassandra', cassandraOptionsSchema, CassandraRepository.open);
