import type { Pool } from 'mysql2/promise';
import {
  type MigrateResult,
  type SqlDialect,
  type SqlMigrateOptions,
  sqlMigration,
} from '../sql/migration.js';
import { tableInUse } from '../sql/store.js';
import {
  describeAddress,
  type MySqlOptions,
  type MySqlRepositoryOptions,
  mysqlDefaults,
  parseMySqlOptions,
  tables,
} from './options.js';
import {
  ADDED_COLUMNS,
  COLUMNS,
  ER_DUP_FIELDNAME,
  ER_LOCK_WAIT_TIMEOUT,
  errorNumber,
  MAX_FIELD_BYTES,
  quoteTable,
  schemaAndName,
} from './sql.js';

export { COLUMNS, type MigrateResult };

/**
 * The DDL of the table, one statement per entry.
 * - Ids, owners and fingerprints are bytes: a utf8mb4 `VARCHAR` would compare through a collation (`a` = `A`), and
 *   `VARCHAR(1024)` would pass InnoDB's 3072-byte index key limit.
 * - Times are epoch ms; `forget_at` is when `purge()` may delete the row.
 * - `token`: the random number of the last statement that wrote the row, by which a multi-row upsert tells which
 *   rows it took (MariaDB has no `RETURNING` on an upsert, MySQL none at all).
 */
export function schemaStatements(table: string = mysqlDefaults.table): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${quoteTable(tables.check(table))} (
  namespace VARBINARY(255) NOT NULL,
  id VARBINARY(1024) NOT NULL,
  state ENUM('in-flight', 'confirmed') NOT NULL,
  expires_at BIGINT NOT NULL,
  lease_expires_at BIGINT NULL,
  owner VARBINARY(${MAX_FIELD_BYTES}) NULL,
  event_time BIGINT NULL,
  fingerprint VARBINARY(${MAX_FIELD_BYTES}) NULL,
  result MEDIUMBLOB NULL,
  forget_at BIGINT NOT NULL,
  token BIGINT NOT NULL,
  first_seen_at BIGINT NULL,
  PRIMARY KEY (namespace, id),
  KEY forget_at (forget_at)
) ENGINE = InnoDB ROW_FORMAT = DYNAMIC DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`,
  ];
}

/** MySQL and MariaDB for the SQL core. */
export const dialect: SqlDialect<Pool, MySqlOptions> = {
  store: 'mysql',
  statements: schemaStatements,
  apply: createMissingTable,
  columnsOf,
  layout: { columns: COLUMNS, added: ADDED_COLUMNS, quote: quoteTable },
  parseOptions: parseMySqlOptions,
  describeAddress,
  connection: () => import('./connection.js'),
};

export type MigrateOptions = SqlMigrateOptions<MySqlRepositoryOptions, Pool>;

/** `migrate` is safe to run again, and at once from several processes (a metadata lock serializes the DDL). */
export const { migrate, schemaScript } = sqlMigration<Pool, MySqlOptions, MigrateOptions>(dialect);

/** Adds only what the catalog lacks (MySQL has no `ADD COLUMN IF NOT EXISTS`): a run again takes no lock. */
async function createMissingTable(pool: Pool, table: string): Promise<string[]> {
  const present = await columnsOf(pool, table);
  const ddl =
    present.size === 0
      ? schemaStatements(table)
      : (Object.keys(ADDED_COLUMNS) as (keyof typeof ADDED_COLUMNS)[])
          .filter((column) => !present.has(column))
          .map(
            (column) =>
              `ALTER TABLE ${quoteTable(table)} ADD COLUMN ${column} ${ADDED_COLUMNS[column].toUpperCase()} NULL`,
          );
  try {
    for (const statement of ddl) {
      await pool.query(statement).catch((error: unknown) => {
        // Another process added the column first.
        if (errorNumber(error) !== ER_DUP_FIELDNAME) throw error;
      });
    }
  } catch (error) {
    if (errorNumber(error) === ER_LOCK_WAIT_TIMEOUT) throw tableInUse('mysql', table, error);
    throw error;
  }
  return ddl;
}

async function columnsOf(pool: Pool, table: string): Promise<Map<string, string>> {
  const [rows] = await pool.execute(
    'SELECT COLUMN_NAME AS name, DATA_TYPE AS type FROM information_schema.COLUMNS ' +
      'WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?',
    schemaAndName(table),
  );
  return new Map(
    (rows as { name: unknown; type: unknown }[]).map((row) => [
      String(row.name),
      String(row.type).toLowerCase(),
    ]),
  );
}
