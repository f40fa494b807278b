import { isIP } from 'node:net';
import { z } from 'zod';
import { parseOptions } from '../../options/issues.js';
import { refuseBadPercentEscapes, timerMs } from '../../options/limits.js';
import { tlsSettingSchema } from '../../options/tls.js';

/** Defaults of the MySQL/MariaDB repository, written once. */
export const mysqlDefaults = {
  /** The table every record lives in; `database.table` is allowed. Created only by the migration. */
  table: 'processed_ids',
  /** Keeps several repositories (and test runs) apart in one table; `clear()` deletes only its own rows. */
  namespace: 'default',
  /**
   * Off: the table belongs to a migration (`idem migrate`, `migrate()`), not to an application's first start.
   * `true` runs the same idempotent DDL at open.
   */
  createTable: false,
  /**
   * How long a claim waits for another open transaction that holds the same id before it answers in-progress.
   * InnoDB counts whole seconds (`innodb_lock_wait_timeout`), so it is rounded up to the next second, at least 1.
   */
  lockTimeoutMs: 5_000,
  /** Connections of the pool the repository creates (mysql2 `connectionLimit`; a borrowed pool keeps its own). */
  poolSize: 10,
  /** Waiting for a TCP connection (mysql2 `connectTimeout`). */
  connectTimeoutMs: 5_000,
  /** Rows one `purge()` statement deletes at most: a bounded transaction, short row locks. */
  purgeBatchSize: 10_000,
  /** Background purge period in ms; 0 (the default) runs none, and `purge()` is the caller's to schedule. */
  purgeIntervalMs: 0,
} as const satisfies Record<string, unknown>;

/**
 * One part of a table name: letters, digits, `_` and `$`, not starting with a digit, at most 64 characters
 * (MySQL's identifier limit). Stricter than MySQL, so a name never needs more than backquotes.
 */
export const IDENTIFIER_PATTERN = /^[A-Za-z_][A-Za-z0-9_$]{0,63}$/;

/** `table` or `database.table`, each part an {@link IDENTIFIER_PATTERN}. */
export const TABLE_PATTERN = /^(?:[A-Za-z_][A-Za-z0-9_$]{0,63}\.)?[A-Za-z_][A-Za-z0-9_$]{0,63}$/;

/** Longest namespace, in UTF-8 bytes: the width of the `namespace` column (see migration.ts). */
export const MAX_NAMESPACE_BYTES = 255;

/** Config schema for `repository.type = "mysql"`. */
export const mysqlOptionsSchema = z
  .object({
    /**
     * `mysql://user:password@host:port/database`; optional only when an existing pool is passed to
     * `MySqlRepository.open`. The password never appears in errors or logs.
     */
    url: z
      .url({ protocol: /^(mysql|mariadb)$/, error: 'must be a mysql:// or mariadb:// URL' })
      .superRefine(refuseBadPercentEscapes)
      .optional(),
    /** The password, when it is kept out of the URL (a secret store, an env variable). */
    password: z.string().optional(),
    /** `table` or `database.table`. */
    table: z
      .string()
      .regex(
        TABLE_PATTERN,
        'must be a table name or database.table, each 1-64 letters, digits, "_" or "$", not starting with a digit',
      )
      .default(mysqlDefaults.table),
    namespace: z
      .string()
      .min(1)
      .refine((ns) => Buffer.byteLength(ns, 'utf8') <= MAX_NAMESPACE_BYTES, {
        message: `must be at most ${MAX_NAMESPACE_BYTES} UTF-8 bytes`,
      })
      .default(mysqlDefaults.namespace),
    createTable: z.boolean().default(mysqlDefaults.createTable),
    /**
     * TLS to the server: `true` (system CAs) or `{ ca, cert, key, servername, rejectUnauthorized }`; certificates
     * and the host name they name (the URL's host, or `servername`) are verified.
     */
    tls: tlsSettingSchema
      // mysql2 sends no SNI for an address and checks the certificate against the host it connects to, so an
      // address here could not be honoured: it would be dropped without a word.
      .refine(
        (tls) => typeof tls !== 'object' || tls.servername === undefined || isIP(tls.servername) === 0,
        {
          path: ['servername'],
          message:
            "must be a host name, not an IP address (the URL's address is what a certificate is checked against)",
        },
      )
      .optional(),
    lockTimeoutMs: timerMs().default(mysqlDefaults.lockTimeoutMs),
    poolSize: z.number().int().min(1).max(1_000).default(mysqlDefaults.poolSize),
    connectTimeoutMs: timerMs().default(mysqlDefaults.connectTimeoutMs),
    purgeBatchSize: z.number().int().min(1).max(1_000_000).default(mysqlDefaults.purgeBatchSize),
    purgeIntervalMs: timerMs(0).default(mysqlDefaults.purgeIntervalMs),
  })
  .strict();

/** Parsed options of the MySQL repository, every default filled in. */
export type MySqlOptions = z.output<typeof mysqlOptionsSchema>;

/** Options of {@link MySqlRepository.open}, as written in config. */
export type MySqlRepositoryOptions = z.input<typeof mysqlOptionsSchema>;

/** Validates options given in code; a bad one is a ConfigError naming the option, keyed `repository.<key>`. */
export function parseMySqlOptions(input: unknown, owner = 'MySqlRepository.open(...)'): MySqlOptions {
  return parseOptions(mysqlOptionsSchema, input, { kind: 'code', owner, prefix: ['repository'] });
}

/** Where the pool connects, without credentials (they must not reach logs or errors). */
export function describeAddress(url: string | undefined): string {
  if (url === undefined) return 'the given pool';
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.hostname}:${u.port || 3306}${u.pathname.length > 1 ? u.pathname : ''}`;
  } catch {
    return 'an unparsable URL';
  }
}
