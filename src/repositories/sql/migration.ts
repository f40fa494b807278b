import { ConfigError } from '../../errors.js';
import { closePool, type SqlPool, type TableLayout } from './connection.js';
import { type SqlOptions, sqlDefaults } from './options.js';

/*
 * Nothing creates a SQL store's table behind the user's back: `migrate()`, `idem migrate --apply`, the team's own
 * tool, or `createTable: true`. Only the DDL of what is missing runs: a migration run again locks nothing.
 */

/** What a store's `migrate()` needs: where (a URL or a pool) and which table. */
export type SqlMigrateOptions<O, P> = Pick<
  O,
  Extract<'url' | 'password' | 'tls' | 'connectTimeoutMs', keyof O>
> & {
  readonly table?: string;
  /** A pool to run the DDL on instead of connecting from `url`; left open. */
  readonly pool?: P;
};

/** What a store's `migrate()` did. */
export interface MigrateResult {
  /** The table, as given. */
  readonly table: string;
  /** The table's whole DDL (`schemaStatements`). */
  readonly statements: readonly string[];
  /** The statements that ran: those whose object was missing. */
  readonly applied: readonly string[];
}

/** What a server brings to the SQL core; its driver's side is loaded only to connect (not to print the DDL). */
export interface SqlDialect<P extends SqlPool, O extends SqlOptions> {
  readonly store: 'postgres' | 'mysql';
  /** The DDL of `table`, one statement per entry; a bad table name is a ConfigError. */
  statements(table: string): string[];
  /** Runs the DDL of what is missing; answers the statements run. */
  apply(pool: P, table: string): Promise<string[]>;
  /** The catalog's columns, name → type (empty: no table). */
  columnsOf(pool: P, table: string): Promise<ReadonlyMap<string, string>>;
  readonly layout: TableLayout;
  parseOptions(input: unknown, owner?: string): O;
  describeAddress(url: string | undefined): string;
  connection(): Promise<{ createPool(options: O): P; openError(error: unknown, address: string): unknown }>;
}

/** A store's `schemaScript` and `migrate` (`M`: its options). */
export function sqlMigration<
  P extends SqlPool,
  O extends SqlOptions,
  M extends { readonly pool?: P; readonly table?: string },
>(migration: SqlDialect<P, O>) {
  return {
    /** The DDL as one `;`-terminated script, for `idem migrate` and the docs. */
    schemaScript: (table: string = sqlDefaults.table): string =>
      `${migration.statements(table).join(';\n\n')};\n`,
    /** Creates what is missing of the table on the given pool, or on one connected from the options and closed after. */
    async migrate(options: M): Promise<MigrateResult> {
      const { pool: given, table = sqlDefaults.table, ...connection } = options;
      const statements = migration.statements(table);
      if (given !== undefined) return { table, statements, applied: await migration.apply(given, table) };
      const parsed = migration.parseOptions({ ...connection, table }, 'migrate(...)');
      if (parsed.url === undefined) throw new ConfigError('repository.url', 'is required (or pass a pool)');
      const { createPool, openError } = await migration.connection();
      const pool = createPool(parsed);
      try {
        return { table, statements, applied: await migration.apply(pool, table) };
      } catch (error) {
        throw openError(error, migration.describeAddress(parsed.url));
      } finally {
        await closePool(pool);
      }
    },
  };
}
