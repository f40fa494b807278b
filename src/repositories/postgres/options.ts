import { z } from 'zod';
import { timerMs } from '../../options/limits.js';
import { tlsSettingSchema } from '../../options/tls.js';
import { storeOptionsParser } from '../shared.js';
import { sqlAddress, sqlDefaults, sqlOptionFields, tableRule } from '../sql/options.js';

/** Defaults of the PostgreSQL repository: the SQL stores' (`table` may be `schema.table`), and one more. */
export const postgresDefaults = {
  ...sqlDefaults,
  /**
   * Server-side `statement_timeout` of the pool's connections, so a hung server or a runaway statement cannot stall
   * the consumer (also the handler's own statements inside `transaction()`); 0 turns it off.
   */
  statementTimeoutMs: 10_000,
} as const satisfies Record<string, unknown>;

/** What PostgreSQL accepts unquoted, minus the length the index name's suffix needs. */
export const tables = tableRule(
  /^(?:[A-Za-z_][A-Za-z0-9_]{0,47}\.)?[A-Za-z_][A-Za-z0-9_]{0,47}$/,
  'schema.table, each 1-48 letters, digits or "_"',
);

/** Config schema for `repository.type = "postgres"`. */
export const postgresOptionsSchema = z
  .object({
    ...sqlOptionFields({
      /** `postgres://[user[:password]@]host[:port]/database[?sslmode=…]`; optional only when a pool is passed. */
      url: z
        .url({ protocol: /^postgres(ql)?$/, error: 'must be a postgres:// or postgresql:// URL' })
        .optional(),
      table: tables.schema,
      namespace: z
        .string()
        .min(1)
        .max(256)
        .refine((s) => !s.includes('\u0000'), 'must not contain U+0000'),
      /** `true` (system CAs) or `{ ca, cert, key, servername, rejectUnauthorized }`; certificates are verified. */
      tls: tlsSettingSchema,
    }),
    statementTimeoutMs: timerMs(0).default(postgresDefaults.statementTimeoutMs),
  })
  .strict();

export type PostgresOptions = z.output<typeof postgresOptionsSchema>;

/** As written in config. */
export type PostgresRepositoryOptions = z.input<typeof postgresOptionsSchema>;

export const parsePostgresOptions = storeOptionsParser(postgresOptionsSchema, 'PostgresRepository.open(...)');

export const describeAddress = sqlAddress(5432);
