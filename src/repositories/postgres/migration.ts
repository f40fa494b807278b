import type pg from 'pg';
import { ConfigError } from '../../errors.js';
import {
  describeAddress,
  type PostgresRepositoryOptions,
  parsePostgresOptions,
  postgresDefaults,
  TABLE_PATTERN,
} from './options.js';
import { COLUMNS, forgetIndexName, quoteTable } from './sql.js';

export { COLUMNS };

/*
 * The table of the PostgreSQL repository. Nothing creates it behind the user's back: `migrate()`, `idem migrate
 * --apply`, or the DDL below run by the team's own migration tool (`createTable: true` is the opt-in for tests
 * and demos). Every statement is idempotent (`IF NOT EXISTS`), so running the migration again changes nothing.
 */

/**
 * The DDL of the table (and its schema, when `table` is schema-qualified), one statement per entry.
 *
 * - `namespace`, `id` and the strings are `text COLLATE "C"`: compared byte for byte (what an id is), and the
 *   primary key's B-tree skips the locale's collation rules. Stored strings never hold U+0000 (see sql.ts).
 * - Times are epoch ms in `double precision` (`to_timestamp(expires_at / 1000)` shows them as dates).
 * - `forget_at`: when the row may be deleted (the later of its retention end, its lease end and its minimum
 *   lifetime, on the server's clock). `purge()` deletes by it, through its index.
 */
export function schemaStatements(table: string = postgresDefaults.table): string[] {
  if (!TABLE_PATTERN.test(table)) {
    throw new ConfigError(
      'repository.table',
      `must be a table name or schema.table, each 1-48 letters, digits or "_", got ${JSON.stringify(table)}`,
    );
  }
  const t = quoteTable(table);
  const schema = table.includes('.') ? table.split('.')[0] : undefined;
  return [
    ...(schema === undefined ? [] : [`CREATE SCHEMA IF NOT EXISTS ${quoteTable(schema)}`]),
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
  PRIMARY KEY (namespace, id)
)`,
    `CREATE INDEX IF NOT EXISTS ${quoteTable(forgetIndexName(table))} ON ${t} (forget_at)`,
  ];
}

/** The DDL as one script, `;`-terminated, for `idem migrate` and the docs. */
export function schemaScript(table: string = postgresDefaults.table): string {
  return `${schemaStatements(table).join(';\n\n')};\n`;
}

/** What {@link migrate} needs: where (a URL or a pool) and which table. */
export type MigrateOptions = Pick<
  PostgresRepositoryOptions,
  'url' | 'password' | 'tls' | 'connectTimeoutMs'
> & {
  readonly table?: string;
  /** A pool to run the DDL on instead of connecting from `url`; left open. */
  readonly pool?: pg.Pool;
};

/** What {@link migrate} did. */
export interface MigrateResult {
  /** The table, as given. */
  readonly table: string;
  /** The statements run, in order (each a no-op when its object already existed). */
  readonly statements: readonly string[];
}

/**
 * Creates the table (and its schema) when missing, in one transaction; safe to run again and from several
 * processes at once (a transaction-scoped advisory lock serializes concurrent runs, which `IF NOT EXISTS`
 * alone does not: two CREATE TABLEs racing can both pass the check).
 */
export async function migrate(options: MigrateOptions): Promise<MigrateResult> {
  const { pool: given, table = postgresDefaults.table, ...connection } = options;
  const ddl = schemaStatements(table);
  if (given !== undefined) {
    await runDdl(given, ddl);
    return { table, statements: ddl };
  }
  const parsed = parsePostgresOptions({ ...connection, table }, 'migrate(...)');
  if (parsed.url === undefined) throw new ConfigError('repository.url', 'is required (or pass a pool)');
  // Loaded here, so printing the DDL needs no driver (`idem migrate` without --apply).
  const { closePool, createPool, openError } = await import('./connection.js');
  const pool = createPool(parsed);
  try {
    await runDdl(pool, ddl);
  } catch (error) {
    throw openError(error, describeAddress(parsed.url));
  } finally {
    await closePool(pool);
  }
  return { table, statements: ddl };
}

/** Advisory lock key of the migration (any constant: it only has to be the same in every process). */
const MIGRATION_LOCK = 0x1de_6_0001;

async function runDdl(pool: pg.Pool, ddl: readonly string[]): Promise<void> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    for (const statement of ddl) await client.query(statement);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    throw error;
  } finally {
    client.release(broken);
  }
}
