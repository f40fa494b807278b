import { isIP } from 'node:net';
import { z } from 'zod';
import { parseOptions } from '../../options/issues.js';
import { refuseBadPercentEscapes } from '../../options/limits.js';
import { tlsSettingSchema } from '../../options/tls.js';
import { describeAddress as describeSqlAddress, sqlDefaults, sqlOptionFields } from '../sql/options.js';

/**
 * Defaults of the MySQL/MariaDB repository, written once: the SQL stores' (`table` may be `database.table`).
 * InnoDB counts the lock timeout in whole seconds (`innodb_lock_wait_timeout`), so `lockTimeoutMs` is rounded up
 * to the next second, at least 1; `poolSize` is mysql2's `connectionLimit`, `connectTimeoutMs` its `connectTimeout`.
 */
export const mysqlDefaults = { ...sqlDefaults } as const satisfies Record<string, unknown>;

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
    ...sqlOptionFields(mysqlDefaults),
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
  return describeSqlAddress(url, 3306);
}
