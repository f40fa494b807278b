import type pg from 'pg';
import { errorCode } from '../sql/connection.js';
import {
  type MigrateResult,
  type SqlDialect,
  type SqlMigrateOptions,
  sqlMigration,
} from '../sql/migration.js';
import { tableInUse } from '../sql/store.js';
import { endQuietly } from '../sql/transaction.js';
import {
  describeAddress,
  type PostgresOptions,
  type PostgresRepositoryOptions,
  parsePostgresOptions,
  postgresDefaults,
  tables,
} from './options.js';
import { ADDED_COLUMNS, COLUMNS, forgetIndexName, LOCK_NOT_AVAILABLE, quoteTable } from './sql.js';

export { COLUMNS, type MigrateResult };

/**
 * The DDL of the table and its schema, if qualified, one statement per entry.
 * - Ids and strings are `text COLLATE "C"`: compared byte for byte, without the locale's collation rules.
 * - Times are epoch ms; `forget_at` is when `purge()` may delete the row.
 */
export function schemaStatements(table: string = postgresDefaults.table): string[] {
  return schemaObjects(table).map((object) => object.ddl);
}

interface SchemaObject {
  readonly ddl: string;
  /** A catalog query answering `present`. */
  readonly lookup: pg.QueryConfig<string[]>;
}

/** `ddl`'s object, present when `test` on `values` holds. */
function object(ddl: string, test: string, ...values: string[]): SchemaObject {
  return { ddl, lookup: { text: `SELECT ${test} AS present`, values } };
}

function schemaObjects(table: string): SchemaObject[] {
  const t = quoteTable(tables.check(table));
  const schema = table.includes('.') ? quoteTable(table.split('.')[0] as string) : undefined;
  const index = forgetIndexName(table);
  return [
    ...(schema === undefined
      ? []
      : [object(`CREATE SCHEMA IF NOT EXISTS ${schema}`, 'to_regnamespace($1) IS NOT NULL', schema)]),
    object(
      `CREATE TABLE IF NOT EXISTS ${t} (
  namespace text COLLATE "C" NOT NULL,
  id text COLLATE "C" NOT NULL,
  state text NOT NULL CHECK (state IN ('in-flight', 'confirmed')),
  expires_at double precision NOT NULL,
  lease_expires_at double precision,
  owner text COLLATE "C",
  event_time double precision,
  fingerprint text COLLATE "C",
  result text,
  forget_at double precision NOT NULL,
  first_seen_at double precision,
  PRIMARY KEY (namespace, id)
)`,
      'to_regclass($1) IS NOT NULL',
      t,
    ),
    // What IF NOT EXISTS looks for: any relation of that name in the table's schema.
    object(
      `CREATE INDEX IF NOT EXISTS ${quoteTable(index)} ON ${t} (forget_at)`,
      `EXISTS (SELECT 1 FROM pg_class c JOIN pg_class t ON c.relnamespace = t.relnamespace
          WHERE t.oid = to_regclass($1) AND c.relname = $2)`,
      t,
      index,
    ),
    // The (nullable) columns an older table lacks; a no-op on a table created above.
    ...Object.entries(ADDED_COLUMNS).map(([column, type]) =>
      object(
        `ALTER TABLE ${t} ADD COLUMN IF NOT EXISTS ${column} ${type}`,
        `EXISTS (SELECT 1 FROM pg_attribute
            WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`,
        t,
        column,
      ),
    ),
  ];
}

/** PostgreSQL for the SQL core. */
export const dialect: SqlDialect<pg.Pool, PostgresOptions> = {
  store: 'postgres',
  statements: schemaStatements,
  apply: runDdl,
  columnsOf,
  layout: { columns: COLUMNS, added: ADDED_COLUMNS, quote: quoteTable },
  parseOptions: parsePostgresOptions,
  describeAddress,
  connection: () => import('./connection.js'),
};

export type MigrateOptions = SqlMigrateOptions<PostgresRepositoryOptions, pg.Pool>;

/**
 * `migrate` creates what is missing in one transaction, safe to run again and at once. Only the DDL of objects the
 * catalog lacks runs: `CREATE INDEX IF NOT EXISTS` takes its table lock first, queueing every writer behind it. An
 * advisory lock serializes runs that create something (racing CREATE TABLEs can both pass `IF NOT EXISTS`).
 */
export const { migrate, schemaScript } = sqlMigration<pg.Pool, PostgresOptions, MigrateOptions>(dialect);

/** Advisory lock key of the migration, the same in every process. */
const MIGRATION_LOCK = 0x1de_6_0001;

async function missing(db: pg.Pool | pg.PoolClient, objects: readonly SchemaObject[]): Promise<string[]> {
  const ddl: string[] = [];
  for (const object of objects) {
    const { rows } = await db.query<{ present: boolean }>(object.lookup);
    if (rows[0]?.present !== true) ddl.push(object.ddl);
  }
  return ddl;
}

async function runDdl(pool: pg.Pool, table: string): Promise<string[]> {
  const objects = schemaObjects(table);
  if ((await missing(pool, objects)).length === 0) return [];
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    const ddl = await missing(client, objects);
    for (const statement of ddl) await client.query(statement);
    await client.query('COMMIT');
    return ddl;
  } catch (error) {
    broken = await endQuietly(client, 'ROLLBACK');
    if (errorCode(error) === LOCK_NOT_AVAILABLE) throw tableInUse('postgres', table, error);
    throw error;
  } finally {
    client.release(broken);
  }
}

async function columnsOf(pool: pg.Pool, table: string): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ name: string; type: string }>({
    text: `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type
      FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped`,
    values: [quoteTable(table)],
  });
  return new Map(rows.map((row) => [row.name, row.type]));
}
