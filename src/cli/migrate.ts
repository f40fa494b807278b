import { ConfigError } from '../errors.js';
import type { RepositoryType } from '../repositories/registry.js';
import { type CliStreams, ExitCode, failWith } from './exit-code.js';
import { knownSchemes, storeOfUrl } from './store-url.js';

/**
 * What `idem migrate` needs from a store with a schema. One entry per store in {@link migrations}, loaded only
 * when its URL is given, so printing one store's DDL never loads another's driver.
 */
export interface StoreMigration {
  /** The default table name, for messages. */
  readonly defaultTable: string;
  /** The DDL that creates the store's table (`table`, or the default), as a `;`-terminated script. */
  script(table: string | undefined): string;
  /** Runs that DDL against the server at `url`; answers the statements run (each a no-op when already done). */
  apply(url: string, table: string | undefined): Promise<readonly string[]>;
  /** Where `url` points, without credentials. */
  describe(url: string): string;
}

/** The stores `idem migrate` knows, by `repository.type`. */
export const migrations: Partial<Record<RepositoryType, () => Promise<StoreMigration>>> = {
  postgres: () =>
    sqlMigration(
      import('../repositories/postgres/options.js'),
      import('../repositories/postgres/migration.js'),
    ),
  mysql: () =>
    sqlMigration(import('../repositories/mysql/options.js'), import('../repositories/mysql/migration.js')),
};

/** A SQL store's entry, from its options and migration modules (neither loads the driver). */
async function sqlMigration(
  options: Promise<{ describeAddress(url: string): string }>,
  migration: Promise<{
    migrate(options: { url: string; table?: string }): Promise<{ readonly statements: readonly string[] }>;
    schemaScript(table?: string): string;
  }>,
): Promise<StoreMigration> {
  const [{ describeAddress }, { migrate, schemaScript }, { sqlDefaults }] = await Promise.all([
    options,
    migration,
    import('../repositories/sql/options.js'),
  ]);
  return {
    defaultTable: sqlDefaults.table,
    script: (table) => schemaScript(table),
    apply: async (url, table) =>
      (await migrate({ url, ...(table === undefined ? {} : { table }) })).statements,
    describe: describeAddress,
  };
}

/** Flags of `idem migrate`. */
export interface MigrateFlags {
  readonly store?: string;
  readonly table?: string;
  readonly apply?: boolean;
}

/**
 * `idem migrate --store <url> [--table T] [--apply]`: prints the DDL of the store's table to `out`, or (with
 * `--apply`) creates it. Resolves to the exit code.
 */
export async function runMigrate(flags: MigrateFlags, streams: CliStreams): Promise<number> {
  try {
    const store = flags.store === undefined ? undefined : storeOfUrl(flags.store);
    const load = store === undefined ? undefined : migrations[store.type];
    if (store === undefined || load === undefined) {
      const schemes = [knownSchemes((scheme) => migrations[scheme.type] !== undefined)];
      throw new ConfigError(
        'store',
        flags.store === undefined
          ? `is required: the URL of the database (${schemes.join(', ')})`
          : `must be the URL of a store with a schema (${schemes.join(', ')})`,
        { label: '--store' },
      );
    }
    const migration = await load();
    const table = flags.table;
    const where = migration.describe(store.url);
    const name = table ?? migration.defaultTable;
    // Validates the table name before anything is run.
    const script = migration.script(table);
    if (!flags.apply) {
      streams.out.write(script);
      streams.err.write(
        `idem migrate: the DDL of ${store.type} table ${name}; --apply runs it at ${where}\n`,
      );
      return ExitCode.ok;
    }
    const statements = await migration.apply(store.url, table);
    streams.out.write(`${statements.join(';\n\n')};\n`);
    streams.err.write(
      `idem migrate: ${store.type} table ${name} is ready at ${where} (${statements.length} statements, ` +
        'each a no-op where the object already existed)\n',
    );
    return ExitCode.ok;
  } catch (error) {
    return failWith('idem migrate', error, streams.err);
  }
}
