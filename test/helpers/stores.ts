import type { TestContext } from 'node:test';

/** Stores and servers a run may opt out of with `IDEM_SKIP_STORES=redis,cassandra` (comma separated). */
export type StoreName = 'redis' | 'dynamodb' | 'cassandra' | 'kafka' | 'rocksdb' | 'postgres' | 'mysql';

/** The servers `all` (or `*`) names, and the aliases scripts/test.sh accepts, so both read one variable alike. */
const SERVERS: readonly StoreName[] = ['redis', 'dynamodb', 'cassandra', 'kafka', 'postgres', 'mysql'];
const ALIASES: Record<string, StoreName> = {
  dynamo: 'dynamodb',
  ddb: 'dynamodb',
  dynalite: 'dynamodb',
  postgresql: 'postgres',
  pg: 'postgres',
  mariadb: 'mysql',
};

const skipped = new Set<string>(
  [
    ...(process.env.IDEM_SKIP_STORES ?? '').split(/[,;\s]+/),
    ...(/^(1|true|yes)$/i.test(process.env.IDEM_SKIP_KAFKA ?? '') ? ['kafka'] : []),
  ]
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean)
    .flatMap((s): readonly string[] => (s === 'all' || s === '*' ? SERVERS : [ALIASES[s] ?? s])),
);

/**
 * `false` when the store runs, or the skip reason when the run explicitly opted it out. A store whose server
 * is simply unreachable is NOT skipped: its tests fail loudly.
 */
export function skipUnlessEnabled(store: StoreName): false | string {
  return skipped.has(store) ? `${store} opted out by IDEM_SKIP_STORES` : false;
}

/** Loopback endpoints of the test stack, each overridable by env var. */
export const endpoints = {
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  dynamodbEndpoint: process.env.DYNAMODB_ENDPOINT ?? 'http://127.0.0.1:4567',
  cassandraContactPoints: (process.env.CASSANDRA_CONTACT_POINTS ?? '127.0.0.1:9042').split(','),
  kafkaBrokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
  postgresUrl: process.env.POSTGRES_URL ?? 'postgres://idem:idem@127.0.0.1:5432/idem',
  mysqlUrl: process.env.MYSQL_URL ?? 'mysql://idem:idem@127.0.0.1:3306/idem',
} as const;

/** Registers cleanup on the test context, so a failing test still closes what it opened. */
export function closeAfter<T extends { close(): Promise<unknown> | unknown }>(
  t: TestContext,
  resource: T,
): T {
  t.after(async () => {
    await resource.close();
  });
  return resource;
}
