import type { Pool } from 'mysql2/promise';
import { ConfigError } from '../../errors.js';
import { type MigrateResult, runMigration, type SqlMigrateOptions, script } from '../sql/migration.js';
import { tableInUse } from '../sql/store.js';
import {
  describeAddress,
  type MySqlRepositoryOptions,
  mysqlDefaults,
  parseMySqlOptions,
  TABLE_PATTERN,
} from './options.js';
import { ADDED_COLUMNS, COLUMNS, MAX_FIELD_BYTES, quoteTable } from './sql.js';

export { COLUMNS, type MigrateResult };

/* The table of the MySQL repository, created as every SQL store's is (see ../sql/migration.ts). */

/**
 * The DDL of the table, one statement per entry.
 *
 * - `id VARBINARY(1024)`: ids are up to 1024 UTF-8 bytes (MAX_ID_BYTES), stored as those bytes and compared byte
 *   for byte. A utf8mb4 `VARCHAR` would compare through a collation (`a` = `A`; `x` = `x ` under PAD SPACE) and
 *   `VARCHAR(1024)` reserves 4 bytes a character, 4096 bytes, over InnoDB's 3072-byte index key limit; 1024 bytes
 *   of id plus 255 of namespace fit it (DYNAMIC row format, the default since MySQL 5.7 and MariaDB 10.2).
 * - `owner` and `fingerprint` are bytes too, so an owner token is compared whole and exactly.
 * - Times are epoch ms in `BIGINT`, compared with the server's clock (`@@timestamp`) in every statement.
 * - `forget_at`: when the row may be deleted (the later of its retention end, its lease end and its minimum
 *   lifetime, on the server's clock). `purge()` deletes by it, through its index.
 * - `token`: the random number of the last statement that wrote the row. A multi-row upsert tells by it which
 *   rows it took: MariaDB has no `RETURNING` on an upsert, MySQL none at all.
 */
export function schemaStatements(table: string = mysqlDefaults.table): string[] {
  if (!TABLE_PATTERN.test(table)) {
    throw new ConfigError(
      'repository.table',
      `must be a table name or database.table, each 1-64 letters, digits, "_" or "$", got ${JSON.stringify(table)}`,
    );
  }
  return [
    `CREATE TABLE IF NOT EXISTS ${quoteTable(table)} (
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

/** The DDL as one script, `;`-terminated, for `idem migrate` and the docs. */
export function schemaScript(table: string = mysqlDefaults.table): string {
  return script(schemaStatements(table));
}

/** What {@link migrate} needs: where (a URL or a pool) and which table. */
export type MigrateOptions = SqlMigrateOptions<MySqlRepositoryOptions, Pool>;

/**
 * Creates the table when missing; safe to run again and from several processes at once (MySQL serializes
 * `CREATE TABLE IF NOT EXISTS` on the table's metadata lock: one creates it, the others find it). DDL is not
 * transactional in MySQL: each statement commits on its own.
 */
export function migrate(options: MigrateOptions): Promise<MigrateResult> {
  return runMigration(
    {
      defaultTable: mysqlDefaults.table,
      statements: schemaStatements,
      apply: createMissingTable,
      parseOptions: parseMySqlOptions,
      describeAddress,
      connection: () => import('./connection.js'),
    },
    options,
  );
}

/** ER_LOCK_WAIT_TIMEOUT: a row or metadata lock wait ran out (`innodb_lock_wait_timeout`, `lock_wait_timeout`). */
const LOCK_WAIT_TIMEOUT = 1205;
/** ER_DUP_FIELDNAME: the column exists already. */
const DUPLICATE_COLUMN = 1060;

/** The DDL that adds a column of an older table's missing {@link ADDED_COLUMNS} (nullable: its rows have none). */
function addColumnStatement(table: string, column: keyof typeof ADDED_COLUMNS): string {
  return `ALTER TABLE ${quoteTable(table)} ADD COLUMN ${column} ${ADDED_COLUMNS[column].toUpperCase()} NULL`;
}

/**
 * Runs the DDL when the table is not in the catalog, or adds the columns an older table lacks (MySQL has no
 * `ADD COLUMN IF NOT EXISTS`, so they are looked up first); answers the statements run. On an existing table
 * `CREATE TABLE IF NOT EXISTS` takes only a shared metadata lock, which open transactions on it do not block (the
 * PostgreSQL store's index statement does block); the catalog is still read first, so a migration run again
 * takes no lock on the table at all. Also what `createTable: true` runs at open.
 */
export async function createMissingTable(pool: Pool, table: string): Promise<string[]> {
  const parts = table.split('.');
  const [schema, name] = parts.length === 2 ? [parts[0] as string, parts[1] as string] : [null, table];
  const [rows] = await pool.execute(
    'SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?',
    [schema, name],
  );
  let ddl = schemaStatements(table);
  if ((rows as unknown[]).length > 0) {
    const [columns] = await pool.execute(
      'SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS ' +
        'WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?',
      [schema, name],
    );
    const present = new Set((columns as { name: string }[]).map((c) => c.name));
    ddl = (Object.keys(ADDED_COLUMNS) as (keyof typeof ADDED_COLUMNS)[])
      .filter((column) => !present.has(column))
      .map((column) => addColumnStatement(table, column));
    if (ddl.length === 0) return [];
  }
  try {
    for (const statement of ddl) {
      await pool.query(statement).catch((error: unknown) => {
        // Another process added the column first.
        if ((error as { errno?: unknown }).errno !== DUPLICATE_COLUMN) throw error;
      });
    }
  } catch (error) {
    if ((error as { errno?: unknown }).errno === LOCK_WAIT_TIMEOUT) throw tableInUse('mysql', table, error);
    throw error;
  }
  return ddl;
}
