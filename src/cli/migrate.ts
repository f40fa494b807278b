import { ConfigError } from '../errors.js';
import type { RepositoryType } from '../repositories/registry.js';
import { type CliStreams, ExitCode, failWith } from './exit-code.js';
import { knownSchemes, storeOfUrl } from './store-url.js';

/** What `idem migrate` loads of a SQL store: its options and migration modules, never its driver. */
type SqlModules = readonly [
  { describeAddress(url: string): string },
  {
    migrate(options: { url: string; table?: string }): Promise<{ readonly statements: readonly string[] }>;
    schemaScript(table?: string): string;
  },
];

/** The stores `idem migrate` knows, by `repository.type`, loaded only when their URL is given. */
export const migrations: Partial<Record<RepositoryType, () => Promise<SqlModules>>> = {
  postgres: () =>
    Promise.all([
      import('../repositories/postgres/options.js'),
      import('../repositories/postgres/migration.js'),
    ]),
  mysql: () =>
    Promise.all([import('../repositories/mysql/options.js'), import('../repositories/mysql/migration.js')]),
};

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
      const schemes = knownSchemes((scheme) => migrations[scheme.type] !== undefined);
      const problem =
        flags.store === undefined
          ? 'is required: the URL of the database'
          : 'must be the URL of a store with a schema';
      throw new ConfigError('store', `${problem} (${schemes})`, { label: '--store' });
    }
    const [{ describeAddress }, { migrate, schemaScript }] = await load();
    const { sqlDefaults } = await import('../repositories/sql/options.js');
    const { table } = flags;
    const where = describeAddress(store.url);
    const name = table ?? sqlDefaults.table;
    const script = schemaScript(table); // validates the table name before anything is run
    if (!flags.apply) {
      streams.out.write(script);
      streams.err.write(
        `idem migrate: the DDL of ${store.type} table ${name}; --apply runs it at ${where}\n`,
      );
      return ExitCode.ok;
    }
    const { statements } = await migrate({ url: store.url, ...(table === undefined ? {} : { table }) });
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
