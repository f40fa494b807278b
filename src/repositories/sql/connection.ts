import { ConfigError } from '../../errors.js';
import { type MigrateStore, migrateHint } from './store.js';

/** A driver's pool, as far as the core uses it. */
export interface SqlPool {
  end(): Promise<unknown>;
}

/** Ends an owned pool; errors while closing are irrelevant to the caller. */
export async function closePool(pool: SqlPool): Promise<void> {
  await pool.end().catch(() => undefined);
}

/** The string `code` of a driver error (a SQLSTATE, a driver's or Node's code such as `ECONNREFUSED`). */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * A certificate or handshake failure from Node's TLS layer, or the server refusing TLS: `codes` and `messages`
 * add the driver's own words for it.
 */
export function isTlsFailure(error: unknown, codes: string, messages: string): boolean {
  const code = errorCode(error) ?? '';
  const message = error instanceof Error ? error.message : String(error);
  return (
    new RegExp(`CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS|ERR_SSL|EPROTO${codes}`).test(code) ||
    new RegExp(`${messages}|self[- ]signed certificate`, 'i').test(message)
  );
}

/**
 * Checks the table's columns as the catalog lists them (`actual`, name → type; empty when there is no table)
 * against the ones the statements use. A missing table is a config problem reported at open, naming the command
 * that creates it; a same-named table of another shape would fail every statement. A table of an older version
 * that lacks a column of `added` (added since, nullable) is told to run the migration, which adds it.
 */
export function checkLayout(
  where: {
    readonly store: string;
    readonly table: string;
    readonly quoted: string;
    readonly address: string;
  },
  actual: ReadonlyMap<string, string>,
  columns: Readonly<Record<string, string>>,
  target: MigrateStore,
  added: Readonly<Record<string, string>> = {},
): void {
  const { store, table, quoted, address } = where;
  if (actual.size === 0) {
    throw new ConfigError(
      'repository.table',
      `table ${quoted} does not exist in ${address}; ${migrateHint(store, table, target)}`,
    );
  }
  for (const [name, type] of Object.entries(columns)) {
    if (!actual.has(name) && name in added) {
      throw new ConfigError(
        'repository.table',
        `table ${quoted} predates column ${name}; ${migrateHint(store, table, target, 'add it')}`,
      );
    }
    if (actual.get(name) !== type) {
      throw new ConfigError(
        'repository.table',
        `table ${quoted} does not have the expected layout: column ${name} should be ${type}` +
          `${actual.has(name) ? `, not ${actual.get(name)}` : ' (missing)'}; use another table name or ` +
          'recreate it (idem migrate prints the DDL)',
      );
    }
  }
}
