import { createPool as createMysqlPool, type Pool, type PoolOptions } from 'mysql2/promise';
import { ConfigError, RepositoryError } from '../../errors.js';
import type { TlsOptions } from '../../options/tls.js';
import { connectFailure, detailOf, type MigrateStore, migrateHint } from '../sql-store.js';
import type { MySqlOptions } from './options.js';

export { describeAddress } from './options.js';

import { COLUMNS, quoteTable } from './sql.js';

/** Whole seconds of `innodb_lock_wait_timeout` for a lock timeout in ms: rounded up, at least 1 (InnoDB's unit). */
export function lockWaitSeconds(lockTimeoutMs: number): number {
  return Math.max(1, Math.ceil(lockTimeoutMs / 1000));
}

/**
 * mysql2's `ssl` for `repository.tls`. `true` is TLS with the system CAs; certificates are verified unless the
 * config turns that off by name. Absent: the URL's own `ssl` parameter decides (none by default).
 */
function sslOptions(tls: boolean | TlsOptions | undefined): Pick<PoolOptions, 'ssl'> {
  if (tls === undefined || tls === false) return {};
  const settings = tls === true ? {} : tls;
  return { ssl: { ...settings, rejectUnauthorized: settings.rejectUnauthorized ?? true } };
}

/**
 * A pool for the repository. Its connections carry the repository's lock timeout as `innodb_lock_wait_timeout`,
 * so a claim outside any transaction that meets a row another transaction holds is answered in-progress after
 * it, not after the server's 50 s.
 */
export function createPool(options: MySqlOptions): Pool {
  const pool = createMysqlPool({
    uri: options.url,
    // The URL's password unless one is configured on its own (mysql2 lets explicit options win over the URI).
    ...(options.password !== undefined ? { password: options.password } : {}),
    connectionLimit: options.poolSize,
    connectTimeout: options.connectTimeoutMs,
    // BIGINT columns hold epoch ms (< 2^53): numbers; anything larger comes back as a string, never rounded.
    supportBigNumbers: true,
    bigNumberStrings: false,
    // Each statement text is prepared once per connection and kept. Batch sizes are rounded to a few buckets
    // (sql.ts), so a few hundred texts at most; the bound keeps a pool far below the server's
    // max_prepared_stmt_count (16382 by default, for all clients together).
    maxPreparedStatements: 512,
    ...sslOptions(options.tls),
  });
  const seconds = lockWaitSeconds(options.lockTimeoutMs);
  // Commands on a connection run in order, so this runs before the connection's first statement.
  pool.pool.on('connection', (connection) => {
    connection.query(`SET SESSION innodb_lock_wait_timeout = ${seconds}`, () => {});
  });
  return pool;
}

/** Ends an owned pool; errors while closing are irrelevant to the caller. */
export async function closePool(pool: Pool): Promise<void> {
  await pool.end().catch(() => undefined);
}

/** The server's error number (`errno`) of a mysql2 error. */
export function errorNumber(error: unknown): number | undefined {
  const errno = (error as { errno?: unknown } | undefined)?.errno;
  return typeof errno === 'number' ? errno : undefined;
}

/** The Node or mysql2 error code (`ECONNREFUSED`, `ER_ACCESS_DENIED_ERROR`). */
function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** A certificate or handshake failure from Node's TLS layer, or the server refusing TLS. */
function isTlsFailure(error: unknown): boolean {
  const code = errorCode(error) ?? '';
  const message = error instanceof Error ? error.message : String(error);
  return (
    /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS|ERR_SSL|EPROTO|HANDSHAKE_NO_SSL_SUPPORT/.test(code) ||
    /does not support secure connection|self[- ]signed certificate/i.test(message)
  );
}

/**
 * Maps a failure while opening the store (or migrating) to the setting most likely at fault: a ConfigError for
 * what the user must fix (credentials, database name, TLS, host name), a retryable RepositoryError when the
 * server may just not be up yet.
 */
export function openError(error: unknown, address: string): unknown {
  if (error instanceof ConfigError || error instanceof RepositoryError) return error;
  const errno = errorNumber(error);
  const code = errorCode(error);
  const detail = detailOf(error);
  // 1045 access denied, 1044 no access to the database, 1698 a user that logs in by socket only.
  if (errno === 1045 || errno === 1044 || errno === 1698) {
    return new ConfigError('repository.password', `authentication to mysql at ${address} failed: ${detail}`, {
      cause: error,
    });
  }
  if (errno === 1049) {
    return new ConfigError('repository.url', `mysql at ${address}: ${detail}`, { cause: error });
  }
  return connectFailure(
    'mysql',
    address,
    error,
    { failed: isTlsFailure(error), serverHint: 'TLS enabled (ssl_cert, ssl_key)' },
    code,
  );
}

/**
 * Checks the table exists with the columns and types the statements use. A missing table is a config problem
 * reported at open, naming the command that creates it; a same-named table of another shape would fail every
 * statement.
 */
export async function assertTable(
  pool: Pool,
  table: string,
  address: string,
  target: MigrateStore,
): Promise<void> {
  const parts = table.split('.');
  const [schema, name] = parts.length === 2 ? [parts[0] as string, parts[1] as string] : [null, table];
  const [rows] = await pool.execute(
    'SELECT COLUMN_NAME AS name, DATA_TYPE AS type FROM information_schema.COLUMNS ' +
      'WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?',
    [schema, name],
  );
  const actual = new Map(
    (rows as { name: unknown; type: unknown }[]).map((row) => [
      String(row.name),
      String(row.type).toLowerCase(),
    ]),
  );
  if (actual.size === 0) {
    throw new ConfigError(
      'repository.table',
      `table ${quoteTable(table)} does not exist in ${address}; ${migrateHint('mysql', table, target)}`,
    );
  }
  for (const [column, type] of Object.entries(COLUMNS)) {
    if (actual.get(column) !== type) {
      throw new ConfigError(
        'repository.table',
        `table ${quoteTable(table)} does not have the expected layout: column ${column} should be ${type}` +
          `${actual.has(column) ? `, not ${actual.get(column)}` : ' (missing)'}; use another table name or ` +
          'recreate it (idem migrate prints the DDL)',
      );
    }
  }
}
