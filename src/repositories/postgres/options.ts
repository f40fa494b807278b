import { z } from 'zod';
import { parseOptions } from '../../options/issues.js';
import { timerMs } from '../../options/limits.js';
import { tlsSettingSchema } from '../../options/tls.js';

/** Defaults of the PostgreSQL repository, written once. */
export const postgresDefaults = {
  /** The table every record lives in; `schema.table` is allowed. Created only by the migration. */
  table: 'processed_ids',
  /** Key component that keeps several repositories (and test namespaces) apart in one table. */
  namespace: 'default',
  /** Off by default: production schemas belong to migrations (`idem migrate`), not to a worker's first start. */
  createTable: false,
  /** Connections of the pool the repository creates (a borrowed pool keeps its own size). */
  poolSize: 10,
  /** Waiting for a TCP connection, and for a free pooled connection. */
  connectTimeoutMs: 5_000,
  /**
   * Server-side `statement_timeout` of the connections the repository creates: a statement that runs longer is
   * cancelled, so a hung server or a runaway statement cannot stall the consumer. It also bounds the handler's
   * own statements inside `transaction()`, which run on the same connection. 0 turns it off.
   */
  statementTimeoutMs: 10_000,
  /**
   * How long a claim waits for another open transaction holding the same id before it is answered in-progress
   * (`lock_timeout`: per transaction in `transaction()`, per connection for the pool the repository creates).
   */
  lockTimeoutMs: 5_000,
  /** Rows one `purge()` statement deletes at most: a bounded transaction, short row locks. */
  purgeBatchSize: 10_000,
  /** Background purge period in ms; 0 (the default) runs none, and `purge()` is the caller's to schedule. */
  purgeIntervalMs: 0,
} as const satisfies Record<string, unknown>;

/** One identifier part: what PostgreSQL accepts unquoted, minus the length left for the index name suffix. */
export const IDENTIFIER_PATTERN = /^[A-Za-z_][A-Za-z0-9_]{0,47}$/;

/** `table` or `schema.table`, each part an {@link IDENTIFIER_PATTERN}. */
export const TABLE_PATTERN = /^(?:[A-Za-z_][A-Za-z0-9_]{0,47}\.)?[A-Za-z_][A-Za-z0-9_]{0,47}$/;

/** Config schema for `repository.type = "postgres"`. */
export const postgresOptionsSchema = z
  .object({
    /**
     * `postgres://[user[:password]@]host[:port]/database[?sslmode=…]`; optional only when a pool is passed to
     * `PostgresRepository.open`.
     */
    url: z
      .url({ protocol: /^postgres(ql)?$/, error: 'must be a postgres:// or postgresql:// URL' })
      .optional(),
    /** The password, when it is kept out of the URL (a secret store, an env variable). */
    password: z.string().optional(),
    table: z
      .string()
      .regex(
        TABLE_PATTERN,
        'must be a table name or schema.table, each 1-48 letters, digits or "_", not starting with a digit',
      )
      .default(postgresDefaults.table),
    namespace: z
      .string()
      .min(1)
      .max(256)
      .refine((s) => !s.includes('\u0000'), 'must not contain U+0000')
      .default(postgresDefaults.namespace),
    createTable: z.boolean().default(postgresDefaults.createTable),
    /** TLS: `true` (system CAs) or `{ ca, cert, key, servername, rejectUnauthorized }`; certificates are verified. */
    tls: tlsSettingSchema.optional(),
    poolSize: z.number().int().min(1).max(1_000).default(postgresDefaults.poolSize),
    connectTimeoutMs: timerMs().default(postgresDefaults.connectTimeoutMs),
    statementTimeoutMs: timerMs(0).default(postgresDefaults.statementTimeoutMs),
    lockTimeoutMs: timerMs().default(postgresDefaults.lockTimeoutMs),
    purgeBatchSize: z.number().int().min(1).max(1_000_000).default(postgresDefaults.purgeBatchSize),
    purgeIntervalMs: timerMs(0).default(postgresDefaults.purgeIntervalMs),
  })
  .strict();

/** Parsed options of the PostgreSQL repository, every default filled in. */
export type PostgresOptions = z.output<typeof postgresOptionsSchema>;

/** Options of {@link PostgresRepository.open}, as written in config. */
export type PostgresRepositoryOptions = z.input<typeof postgresOptionsSchema>;

/**
 * Validates options given in code (the config path validates through the same funnel); a bad one is a
 * ConfigError naming the option and `owner`, keyed `repository.<key>`.
 */
export function parsePostgresOptions(
  input: unknown,
  owner = 'PostgresRepository.open(...)',
): PostgresOptions {
  return parseOptions(postgresOptionsSchema, input, { kind: 'code', owner, prefix: ['repository'] });
}

/** Where the pool connects, without credentials (they must not reach logs or errors). */
export function describeAddress(url: string | undefined): string {
  if (url === undefined) return 'the given pool';
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.hostname}:${u.port || 5432}${u.pathname.length > 1 ? u.pathname : ''}`;
  } catch {
    return 'an unparsable URL';
  }
}
