import { ConfigError, errorMessage, RepositoryError } from '../../errors.js';
import { TLS_ERROR_CODES } from '../shared.js';
import { detailOf, type MigrateStore, migrateHint } from './store.js';

export interface SqlPool {
  end(): Promise<unknown>;
}

export async function closePool(pool: SqlPool): Promise<void> {
  await pool.end().catch(() => undefined);
}

/** A driver error's string `code` (a SQLSTATE, or Node's such as `ECONNREFUSED`). */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The columns a server's statements use, with the type its catalog reports for each. */
export interface TableLayout {
  readonly columns: Readonly<Record<string, string>>;
  /** Columns added after the first release: the migration adds them to an older table. */
  readonly added: Readonly<Record<string, string>>;
  quote(table: string): string;
}

/** Checks the catalog's columns (`actual`, name → type; none: no table); a missing table names the migration. */
export function checkLayout(
  where: { readonly store: string; readonly table: string; readonly address: string },
  actual: ReadonlyMap<string, string>,
  layout: TableLayout,
  target: MigrateStore,
): void {
  const { store, table, address } = where;
  const quoted = layout.quote(table);
  if (actual.size === 0) {
    throw new ConfigError(
      'repository.table',
      `table ${quoted} does not exist in ${address}; ${migrateHint(store, table, target)}`,
    );
  }
  for (const [name, type] of Object.entries(layout.columns)) {
    if (!actual.has(name) && name in layout.added) {
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

/** How a server says what went wrong at open (see {@link openFailure}). */
export interface ServerFailures {
  /** The driver's code of an error (a SQLSTATE, an errno), as `refused` and `unknownDatabase` list them. */
  code(error: unknown): string | number | undefined;
  readonly refused: readonly (string | number)[];
  readonly unknownDatabase: readonly (string | number)[];
  /** The server asked for a password and none was sent. */
  noPassword(error: unknown): boolean;
  readonly passwordPlaces: string;
  /** The driver's own codes (`|`-led) and words for a TLS failure, and what the server needs for TLS. */
  readonly tls: { readonly codes: string; readonly messages: string; readonly serverHint: string };
}

/** A ConfigError naming the setting most likely at fault, else a retryable RepositoryError (a server not up yet). */
export function openFailure(
  store: string,
  address: string,
  error: unknown,
  server: ServerFailures,
): ConfigError | RepositoryError {
  if (error instanceof ConfigError || error instanceof RepositoryError) return error;
  const detail = detailOf(error);
  const code = server.code(error);
  if (server.noPassword(error)) {
    return new ConfigError(
      'repository.password',
      `${store} at ${address} asks for a password, and none was given: put it in ${server.passwordPlaces}`,
      { cause: error },
    );
  }
  if (code !== undefined && server.refused.includes(code)) {
    const message = `authentication to ${store} at ${address} failed: ${detail}`;
    return new ConfigError('repository.password', message, { cause: error });
  }
  if (code !== undefined && server.unknownDatabase.includes(code)) {
    return new ConfigError('repository.url', `${store} at ${address}: ${detail}`, { cause: error });
  }
  const nodeCode = errorCode(error) ?? '';
  if (nodeCode === 'ENOTFOUND' || nodeCode === 'EAI_AGAIN') {
    return new ConfigError('repository.url', `cannot resolve the ${store} host of ${address}: ${detail}`, {
      cause: error,
    });
  }
  const { tls } = server;
  const message = errorMessage(error);
  const tlsFailed =
    new RegExp(`${TLS_ERROR_CODES}${tls.codes}`).test(nodeCode) ||
    new RegExp(`${tls.messages}|self[- ]signed certificate`, 'i').test(message);
  // A certificate its CA vouches for, issued for another host than the one connected to.
  const hostMismatch =
    nodeCode === 'ERR_TLS_CERT_ALTNAME_INVALID' || /does not match certificate's altnames/.test(message);
  if (tlsFailed) {
    const advice = hostMismatch
      ? `refused: the server's certificate is not issued for this host (${detail}); connect by a name the ` +
        'certificate carries, or set repository.tls.servername to it'
      : `failed (${detail}); set repository.tls.ca to the PEM of the CA that signed the server's certificate, ` +
        `or check that the server has ${tls.serverHint}`;
    return new ConfigError('repository.tls', `TLS connection to ${store} at ${address} ${advice}`, {
      cause: error,
    });
  }
  return new RepositoryError(`${store}: cannot connect to ${address} (repository.url): ${detail}`, {
    cause: error,
  });
}
