import { isIP } from 'node:net';
import { z } from 'zod';
import { refuseBadPercentEscapes } from '../../options/limits.js';
import { tlsSettingSchema } from '../../options/tls.js';
import { storeOptionsParser } from '../shared.js';
import { sqlAddress, sqlDefaults, sqlOptionFields, tableRule } from '../sql/options.js';

/**
 * Defaults of the MySQL/MariaDB repository: the SQL stores' (`table` may be `database.table`). `lockTimeoutMs` is
 * rounded up to whole seconds (`innodb_lock_wait_timeout`), at least 1; `poolSize` is mysql2's `connectionLimit`.
 */
export const mysqlDefaults = { ...sqlDefaults } as const satisfies Record<string, unknown>;

/** Stricter than MySQL, so a name never needs more than backquotes. */
export const tables = tableRule(
  /^(?:[A-Za-z_][A-Za-z0-9_$]{0,63}\.)?[A-Za-z_][A-Za-z0-9_$]{0,63}$/,
  'database.table, each 1-64 letters, digits, "_" or "$"',
);

/** The width of the `namespace` column. */
const MAX_NAMESPACE_BYTES = 255;

/** Config schema for `repository.type = "mysql"`. */
export const mysqlOptionsSchema = z
  .object(
    sqlOptionFields({
      /** `mysql://user:password@host:port/database`; optional only when a pool is passed. */
      url: z
        .url({ protocol: /^(mysql|mariadb)$/, error: 'must be a mysql:// or mariadb:// URL' })
        .superRefine(refuseBadPercentEscapes)
        .optional(),
      table: tables.schema,
      namespace: z
        .string()
        .min(1)
        .refine((ns) => Buffer.byteLength(ns, 'utf8') <= MAX_NAMESPACE_BYTES, {
          message: `must be at most ${MAX_NAMESPACE_BYTES} UTF-8 bytes`,
        }),
      /**
       * `true` (system CAs) or `{ ca, cert, key, servername, rejectUnauthorized }`; certificates and the host name
       * they name (the URL's host, or `servername`) are verified. mysql2 sends no SNI for an address and checks the
       * certificate against the host it connects to: an address as `servername` could not be honoured.
       */
      tls: tlsSettingSchema.refine(
        (tls) => typeof tls !== 'object' || tls.servername === undefined || isIP(tls.servername) === 0,
        {
          path: ['servername'],
          message:
            "must be a host name, not an IP address (the URL's address is what a certificate is checked against)",
        },
      ),
    }),
  )
  .strict();

export type MySqlOptions = z.output<typeof mysqlOptionsSchema>;

/** As written in config. */
export type MySqlRepositoryOptions = z.input<typeof mysqlOptionsSchema>;

export const parseMySqlOptions = storeOptionsParser(mysqlOptionsSchema, 'MySqlRepository.open(...)');

export const describeAddress = sqlAddress(3306);
