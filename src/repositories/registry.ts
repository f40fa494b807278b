import { ConfigError, errorMessage } from '../errors.js';
import { asMissingDependency } from '../util/optional-module.js';
import type { RepositoryModule } from './module.js';

/** The values of `repository.type`, default first. */
export const repositoryTypes = [
  'rocksdb',
  'memory',
  'redis',
  'dynamodb',
  'cassandra',
  'kafka',
  'postgres',
  'mysql',
] as const;

/** A store that config can select. */
export type RepositoryType = (typeof repositoryTypes)[number];

/** The `repository.type` used when config names none: the embedded on-disk store. */
export const defaultRepositoryType: RepositoryType = 'rocksdb';

/**
 * Each store's module, imported only when selected, and the optional npm packages it needs. Kafka's default client
 * ships with the package; `kafka.client = "kafkajs"` needs kafkajs, which the client loader names when missing.
 */
const stores: Record<RepositoryType, [() => Promise<{ repositoryModule: RepositoryModule }>, string[]]> = {
  rocksdb: [() => import('./rocksdb/index.js'), []],
  memory: [() => import('./memory/index.js'), []],
  redis: [() => import('./redis/index.js'), ['ioredis']],
  dynamodb: [() => import('./dynamodb/index.js'), ['@aws-sdk/client-dynamodb']],
  cassandra: [() => import('./cassandra/index.js'), ['cassandra-driver']],
  kafka: [() => import('./kafka/index.js'), []],
  postgres: [() => import('./postgres/index.js'), ['pg']],
  mysql: [() => import('./mysql/index.js'), ['mysql2']],
};

/** The optional npm packages each store needs (see {@link stores}). */
export const repositoryPackages: Readonly<Record<RepositoryType, readonly string[]>> = Object.fromEntries(
  repositoryTypes.map((type) => [type, stores[type][1]]),
) as Record<RepositoryType, string[]>;

/** Imports the store's module; a failure is a ConfigError on `repository.type` (see {@link loadFailure}). */
export async function loadRepositoryModule(type: RepositoryType): Promise<RepositoryModule> {
  const load = stores[type]?.[0];
  if (!load) {
    throw new ConfigError('repository.type', `unknown type ${JSON.stringify(type)}; ${validTypes()}`);
  }
  try {
    return (await load()).repositoryModule;
  } catch (error) {
    throw loadFailure(type, error);
  }
}

/**
 * The ConfigError for a store module that failed to import: which npm package to install when an optional
 * client library is missing, the loader's own message otherwise.
 */
export function loadFailure(type: RepositoryType, error: unknown): ConfigError {
  const message =
    asMissingDependency(error, { feature: `the ${type} store` })?.message ??
    `the ${type} store could not be loaded: ${errorMessage(error)}`;
  return new ConfigError('repository.type', message, { cause: error });
}

/** `valid types: rocksdb, memory, ...` for error messages. */
export function validTypes(): string {
  return `valid types: ${repositoryTypes.join(', ')}`;
}
