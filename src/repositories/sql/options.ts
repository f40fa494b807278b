import { z } from 'zod';
import { ConfigError } from '../../errors.js';
import { timerMs } from '../../options/limits.js';

/** Defaults both SQL stores share (each store's `…Defaults` starts from them). */
export const sqlDefaults = {
  /** The table every record lives in, optionally qualified (schema or database). */
  table: 'processed_ids',
  /** Keeps several repositories (and test namespaces) apart in one table; `clear()` deletes only its own rows. */
  namespace: 'default',
  /** Off: the table belongs to a migration (`idem migrate`, `migrate()`); `true` runs the same DDL at open. */
  createTable: false,
  /** Connections of the pool the repository creates (a borrowed pool keeps its own size). */
  poolSize: 10,
  /** Waiting for a TCP connection. */
  connectTimeoutMs: 5_000,
  /** How long a claim waits for another transaction holding the id before it is answered in progress. */
  lockTimeoutMs: 5_000,
  /** Rows one `purge()` statement deletes at most: short transactions and row locks. */
  purgeBatchSize: 10_000,
  /** Background purge period in ms; 0 runs none (`purge()` is the caller's to schedule). */
  purgeIntervalMs: 0,
} as const satisfies Record<string, unknown>;

export interface SqlOptions {
  readonly url?: string | undefined;
  readonly password?: string | undefined;
  readonly table: string;
  readonly createTable: boolean;
  readonly lockTimeoutMs: number;
  readonly purgeBatchSize: number;
  readonly purgeIntervalMs: number;
}

/** A server's table names: `pattern`, described by `words`, for the schema and `check` (a name from code). */
export function tableRule(pattern: RegExp, words: string) {
  return {
    schema: z
      .string()
      .regex(pattern, `must be a table name or ${words}, not starting with a digit`)
      .default(sqlDefaults.table),
    check(table: string): string {
      if (!pattern.test(table)) {
        throw new ConfigError(
          'repository.table',
          `must be a table name or ${words}, got ${JSON.stringify(table)}`,
        );
      }
      return table;
    },
  };
}

/** The config fields both SQL stores take: the server's `url`, `table`, `namespace` and `tls`, and the rest. */
export function sqlOptionFields<U extends z.ZodType, T extends z.ZodType, S extends z.ZodType>(server: {
  readonly url: U;
  readonly table: T;
  readonly namespace: z.ZodString;
  readonly tls: S;
}) {
  return {
    url: server.url,
    table: server.table,
    namespace: server.namespace.default(sqlDefaults.namespace),
    tls: server.tls.optional(),
    /** The password, when it is kept out of the URL (a secret store, an env variable). */
    password: z.string().optional(),
    createTable: z.boolean().default(sqlDefaults.createTable),
    poolSize: z.number().int().min(1).max(1_000).default(sqlDefaults.poolSize),
    connectTimeoutMs: timerMs().default(sqlDefaults.connectTimeoutMs),
    lockTimeoutMs: timerMs().default(sqlDefaults.lockTimeoutMs),
    purgeBatchSize: z.number().int().min(1).max(1_000_000).default(sqlDefaults.purgeBatchSize),
    purgeIntervalMs: timerMs(0).default(sqlDefaults.purgeIntervalMs),
  };
}

/** A server's `describeAddress`: where the pool connects, without credentials. */
export function sqlAddress(defaultPort: number): (url: string | undefined) => string {
  return (url) => {
    if (url === undefined) return 'the given pool';
    try {
      const u = new URL(url);
      return `${u.protocol}//${u.hostname}:${u.port || defaultPort}${u.pathname.length > 1 ? u.pathname : ''}`;
    } catch {
      return 'an unparsable URL';
    }
  };
}
