import { ConfigError, RepositoryError } from '../../errors.js';
import { detailOf, type MigrateStore, migrateHint } from './store.js';

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

/** A certificate or handshake failure, or the server refusing TLS; `codes` and `messages` add the driver's words. */
export function isTlsFailure(error: unknown, codes: string, messages: string): boolean {
  const code = errorCode(error) ?? '';
  const message = error instanceof Error ? error.message : String(error);
  return (
    new RegExp(`CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS|ERR_SSL|EPROTO${codes}`).test(code) ||
    new RegExp(`${messages}|self[- ]signed certificate`, 'i').test(message)
  );
}

/**
 * Checks the table's columns as the catalog lists them (`actual`, name → type; empty: no table) against the ones
 * the statements use. A missing table, or an older one lacking a column of `added`, names the migration.
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

/**
 * The end of a SQL store's open-failure mapping, once its own codes (credentials, database name) were tried: a
 * host name that does not resolve or a TLS failure (`tls`: the driver's own codes and words for one, see
 * isTlsFailure) is the user's to fix (ConfigError naming the setting); anything else may be a server not up yet
 * (retryable RepositoryError).
 */
export function connectFailure(
  store: string,
  address: string,
  error: unknown,
  tls: { readonly codes: string; readonly messages: string; readonly serverHint: string },
): ConfigError | RepositoryError {
  const detail = detailOf(error);
  const code = errorCode(error);
  const tlsFailed = isTlsFailure(error, tls.codes, tls.messages);
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') {
    return new ConfigError('repository.url', `cannot resolve the ${store} host of ${address}: ${detail}`, {
      cause: error,
    });
  }
  if (tlsFailed && isHostNameMismatch(error)) {
    return new ConfigError(
      'repository.tls',
      `TLS connection to ${store} at ${address} refused: the server's certificate is not issued for this host ` +
        `(${detail}); connect by a name the certificate carries, or set repository.tls.servername to it`,
      { cause: error },
    );
  }
  if (tlsFailed) {
    return new ConfigError(
      'repository.tls',
      `TLS connection to ${store} at ${address} failed (${detail}); set repository.tls.ca to the PEM of the CA ` +
        `that signed the server's certificate, or check that the server has ${tls.serverHint}`,
      { cause: error },
    );
  }
  return new RepositoryError(`${store}: cannot connect to ${address} (repository.url): ${detail}`, {
    cause: error,
  });
}

/** A certificate its CA vouches for, issued for another host than the one connected to. */
function isHostNameMismatch(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return (
    errorCode(error) === 'ERR_TLS_CERT_ALTNAME_INVALID' ||
    /does not match certificate's altnames/.test(message)
  );
}
