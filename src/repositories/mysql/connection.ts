import { connect, isIP, type Socket } from 'node:net';
import {
  createPool as createMysqlPool,
  type Pool,
  type PoolConnection,
  type PoolOptions,
  type ResultSetHeader,
} from 'mysql2/promise';
import type { TlsOptions } from '../../options/tls.js';
import { verifiedTls } from '../shared.js';
import { openFailure } from '../sql/connection.js';
import type { MySqlOptions } from './options.js';
import { ER_UNKNOWN_STMT_HANDLER, errorNumber, TRACK_LAST_INSERT_ID } from './sql.js';

/**
 * mysql2's connections (not the wrapper each checkout makes anew) whose OK packets carry `last_insert_id`: an owned
 * pool's from the start, a given pool's from their first one-row claim in a transaction.
 */
export const trackedSessions = new WeakSet<object>();

/** `innodb_lock_wait_timeout` for a lock timeout in ms: whole seconds, rounded up, at least 1. */
export function lockWaitSeconds(lockTimeoutMs: number): number {
  return Math.max(1, Math.ceil(lockTimeoutMs / 1000));
}

/** mysql2's `ssl` for `repository.tls` or the URL's `ssl`: the host name verified too (`verifyIdentity`). */
function sslOptions(tls: boolean | TlsOptions | undefined, url: URL): PoolOptions['ssl'] {
  if (tls === undefined) return urlSsl(url);
  const verified = verifiedTls(tls);
  if (verified === undefined) return undefined;
  const { servername: _checkedThroughHost, ...settings } = verified;
  return { ...settings, verifyIdentity: settings.rejectUnauthorized };
}

function urlSsl(url: URL): PoolOptions['ssl'] {
  const raw = url.searchParams.get('ssl');
  if (raw === null) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return undefined; // a profile name, which mysql2 resolves from the URL itself
  }
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const settings = parsed as { rejectUnauthorized?: unknown; verifyIdentity?: unknown };
  const verified = settings.rejectUnauthorized !== false;
  return { ...settings, verifyIdentity: settings.verifyIdentity ?? verified } as PoolOptions['ssl'];
}

/**
 * Where the pool's connections go, so that the certificate is checked against the right name: Node checks the TLS
 * `servername`, else the socket's `_host`, else "localhost", and for an address mysql2 sets neither. So for an
 * address the socket is made here with `_host` set; with `tls.servername` the pool takes that name as its host
 * (mysql2 sends it as the servername) while the socket goes to the URL's.
 */
function endpointOptions(options: MySqlOptions, url: URL): Pick<PoolOptions, 'host' | 'stream'> {
  const servername = typeof options.tls === 'object' ? options.tls.servername : undefined;
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (servername === undefined && isIP(host) === 0) return {};
  const port = Number(url.port || 3306);
  return {
    ...(servername === undefined ? {} : { host: servername }),
    stream: () => {
      const socket = connect({ host, port, noDelay: true, keepAlive: true });
      if (servername === undefined) (socket as Socket & { _host: string | null })._host = host;
      return socket;
    },
  };
}

/** A pool whose connections commit each statement, carry the repository's lock timeout and track `last_insert_id`. */
export function createPool(options: MySqlOptions): Pool {
  const url = new URL(options.url as string);
  const ssl = sslOptions(options.tls, url);
  // When `repository.tls` decides: mysql2 would let the URL's `ssl` win.
  if (options.tls !== undefined) url.searchParams.delete('ssl');
  const pool = createMysqlPool({
    uri: url.href,
    ...(options.password !== undefined ? { password: options.password } : {}),
    connectionLimit: options.poolSize,
    connectTimeout: options.connectTimeoutMs,
    // BIGINT columns hold epoch ms (< 2^53): numbers; anything larger comes back as a string, never rounded.
    supportBigNumbers: true,
    bigNumberStrings: false,
    // A few hundred texts at most (sizes are bucketed), far below the server's max_prepared_stmt_count (16382).
    maxPreparedStatements: 512,
    ...(ssl === undefined ? {} : { ssl }),
    ...endpointOptions(options, url),
  });
  const seconds = lockWaitSeconds(options.lockTimeoutMs);
  // Commands on a connection run in order, so this runs before the connection's first statement.
  pool.pool.on('connection', (connection) => {
    // autocommit on whatever the server's default: a statement outside a transaction must commit on its own.
    connection.query(`SET SESSION innodb_lock_wait_timeout = ${seconds}, SESSION autocommit = 1`, () => {});
    // On its own: a server without the variable (MySQL) fails it alone.
    connection.query(TRACK_LAST_INSERT_ID, () => {});
    trackedSessions.add(connection);
  });
  return pool;
}

export function openError(error: unknown, address: string): unknown {
  return openFailure('mysql', address, error, {
    code: errorNumber,
    // 1045 access denied, 1044 no access to the database, 1698 a user that logs in by socket only.
    refused: [1045, 1044, 1698],
    unknownDatabase: [1049],
    noPassword: (error) =>
      errorNumber(error) === 1045 &&
      /\(using password: NO\)/.test(error instanceof Error ? error.message : ''),
    passwordPlaces: 'the URL (mysql://user:password@host/database) or in repository.password',
    tls: {
      codes: '|HANDSHAKE_NO_SSL_SUPPORT|HANDSHAKE_SSL_ERROR',
      messages: 'does not support secure connection',
      serverHint: 'TLS enabled (ssl_cert, ssl_key)',
    },
  });
}

/**
 * Runs parameterless `statements` in order, stopping at the first failure, and answers the last OK packet: as one
 * compound statement with `compound` (MariaDB's `BEGIN NOT ATOMIC … END`, no multi-statement flag), else one each.
 */
export async function inOrder(
  connection: PoolConnection,
  statements: readonly string[],
  compound: boolean,
): Promise<ResultSetHeader> {
  if (compound) return execute<ResultSetHeader>(connection, blockOf(statements), NO_PARAMS);
  let header: ResultSetHeader | undefined;
  for (const sql of statements) [header] = await connection.query<ResultSetHeader>(sql);
  return header as ResultSetHeader;
}

const NO_PARAMS: unknown[] = [];

/** By the statement list the repository keeps, then by the one after it. */
const blocks = new WeakMap<readonly string[], Map<string, string>>();

/** `statements` then `last` (when given) as one anonymous compound statement, built once. */
export function blockOf(statements: readonly string[], last = ''): string {
  let built = blocks.get(statements);
  if (built === undefined) {
    built = new Map();
    blocks.set(statements, built);
  }
  let block = built.get(last);
  if (block === undefined) {
    block = `BEGIN NOT ATOMIC ${(last === '' ? statements : [...statements, last]).join('; ')}; END`;
    built.set(last, block);
  }
  return block;
}

type Done = (error: Error | null, result?: unknown) => void;

/** mysql2's callback API under its promise wrapper (`pool.pool`, `connection.connection`). */
interface CoreExecutor {
  execute(sql: string, values: unknown[], done: Done): void;
  prepare?(sql: string, done: (error: Error | null, statement?: PreparedStatement) => void): void;
}

interface PreparedStatement {
  execute(values: unknown[], done: Done): void;
}

/** Prepared statements per connection, by text: mysql2 would hash the whole text (KBs for a claim) per call. */
const preparedOn = new WeakMap<object, Map<string, PreparedStatement>>();

/**
 * Runs a statement through mysql2's callback API, skipping the promise wrapper's stack trace and field pairing;
 * on a connection, as prepared there before. An executor without that core (an instrumented pool) is called as is.
 */
export function execute<T>(executor: Executor, sql: string, params: unknown[]): Promise<T> {
  const connection = (executor as { connection?: CoreExecutor }).connection;
  const core = ((executor as { pool?: unknown }).pool ?? connection) as CoreExecutor | undefined;
  if (typeof core?.execute !== 'function') {
    return executor.execute(sql, params as never[]).then(([result]) => result as T);
  }
  return new Promise<T>((resolve, reject) => {
    const done = settle(resolve, reject);
    if (connection === undefined || typeof connection.prepare !== 'function') {
      core.execute(sql, params, done);
      return;
    }
    executeOn(connection, sql, params, done);
  });
}

/** Made here: a named closure in {@link execute} would be named anew per statement under tsx (the benches). */
function settle<T>(resolve: (value: T) => void, reject: (error: Error) => void): Done {
  return (error, result) => (error ? reject(error) : resolve(result as T));
}

function executeOn(connection: CoreExecutor, sql: string, params: unknown[], done: Done): void {
  let statements = preparedOn.get(connection);
  const statement = statements?.get(sql);
  if (statement !== undefined) {
    statement.execute(params, (error, result) => {
      // Closed by mysql2 meanwhile (the server ran nothing): prepared anew.
      if (error && errorNumber(error) === ER_UNKNOWN_STMT_HANDLER) {
        statements?.delete(sql);
        executeOn(connection, sql, params, done);
        return;
      }
      done(error, result);
    });
    return;
  }
  connection.execute(sql, params, (error, result) => {
    if (!error) {
      // Now in mysql2's statement cache: answered from it at once, without a round trip.
      connection.prepare?.(sql, (failure, prepared) => {
        if (failure || prepared === undefined) return;
        if (statements === undefined) {
          statements = new Map();
          preparedOn.set(connection, statements);
        }
        statements.set(sql, prepared);
      });
    }
    done(error, result);
  });
}

export type Executor = Pool | PoolConnection;
