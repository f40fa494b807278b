import pg from 'pg';
import { verifiedTls } from '../shared.js';
import { errorCode, openFailure } from '../sql/connection.js';
import type { PostgresOptions } from './options.js';

/** URL parameters that set TLS; dropped when `repository.tls` is given, which then decides alone. */
const URL_TLS_PARAMS = ['ssl', 'sslmode', 'sslcert', 'sslkey', 'sslrootcert', 'uselibpqcompat'];

/** node-postgres lets the URL override explicit settings: the password goes into it, its TLS out if `tls` is set. */
function connectionString(options: PostgresOptions): string {
  const url = new URL(options.url as string);
  if (options.password !== undefined) url.password = options.password;
  if (options.tls !== undefined) for (const name of URL_TLS_PARAMS) url.searchParams.delete(name);
  return url.href;
}

/**
 * Ends its socket when connecting fails: node-postgres keeps that of a connection failing to authenticate, and the
 * pool forgets the client, so the socket would hold the process until the server's authentication_timeout.
 */
class Client extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: (error: Error) => void): void;
  override connect(callback?: (error: Error) => void): Promise<pg.Client> | undefined {
    if (callback === undefined) {
      return super.connect().catch((error: unknown) => {
        this.end().catch(() => undefined);
        throw error;
      });
    }
    super.connect((error: Error) => {
      if (error) this.end().catch(() => undefined);
      callback(error);
    });
    return undefined;
  }
}

/** A pool whose connections carry the repository's `lock_timeout` and `statement_timeout`. */
export function createPool(options: PostgresOptions): pg.Pool {
  const pool = new pg.Pool({
    Client,
    connectionString: connectionString(options),
    // Absent, the URL's `sslmode` decides.
    ...(options.tls !== undefined ? { ssl: verifiedTls(options.tls) ?? false } : {}),
    max: options.poolSize,
    connectionTimeoutMillis: options.connectTimeoutMs,
    ...(options.statementTimeoutMs > 0 ? { statement_timeout: options.statementTimeoutMs } : {}),
    lock_timeout: options.lockTimeoutMs,
    application_name: 'idempotent-consumer',
    keepAlive: true,
  });
  // An idle connection that breaks emits 'error' on the pool, which would end the process; the pool drops it.
  pool.on('error', () => {});
  return pool;
}

export function openError(error: unknown, address: string): unknown {
  return openFailure('postgres', address, error, {
    code: errorCode,
    refused: ['28P01', '28000'],
    unknownDatabase: ['3D000'],
    // node-postgres' own complaint when the server asks for a password and none was given (no SQLSTATE).
    noPassword: (error) =>
      /client password must be a (non-empty )?string|^Password must be a string/.test(
        error instanceof Error ? error.message : '',
      ),
    passwordPlaces:
      'the URL (postgres://user:password@host/database), in repository.password, or in the PGPASSWORD ' +
      'environment variable',
    tls: { codes: '', messages: 'does not support SSL|SSL connection', serverHint: 'ssl = on' },
  });
}

interface Protocol {
  parse(config: { text: string }): void;
  bind(config: object): void;
  execute(config: object): void;
  readonly parsedStatements?: Record<string, string>;
}

export interface BoundStatement {
  readonly name: string;
  readonly text: string;
  readonly values: unknown[];
}

const NO_LEAD: readonly string[] = [];

/**
 * node-postgres' Query for a statement, submitted as it is (a config object passed to `query` is copied property by
 * property, the top JS item of a message's profile). It may write parameterless `lead` statements (BEGIN, SET
 * LOCAL) before its own and the one Sync: one round trip, and the statement never runs when its BEGIN did not.
 */
class StatementQuery extends pg.Query {
  readonly #lead: readonly string[];

  constructor(
    statement: BoundStatement,
    lead: readonly string[],
    callback: (error: Error | undefined, result: unknown) => void,
  ) {
    super(statement.text);
    const fields = this as unknown as { name: string; values: unknown[]; callback: typeof callback };
    fields.name = statement.name;
    fields.values = statement.values;
    fields.callback = callback;
    this.#lead = lead;
  }

  prepare(connection: Protocol): void {
    for (const text of this.#lead) {
      connection.parse({ text });
      connection.bind({});
      connection.execute({});
    }
    (pg.Query.prototype as unknown as { prepare(connection: Protocol): void }).prepare.call(this, connection);
  }
}

/** This node-postgres has the Query internals {@link StatementQuery} relies on. */
const SUBMITS = typeof (pg.Query.prototype as { prepare?: unknown }).prepare === 'function';

function submit<R extends pg.QueryResultRow>(
  client: pg.PoolClient,
  lead: readonly string[],
  query: BoundStatement,
): Promise<pg.QueryResult<R>> {
  return new Promise((resolve, reject) => {
    client.query(
      new StatementQuery(query, lead, (error, result) => {
        if (error) reject(error);
        else resolve((Array.isArray(result) ? result.at(-1) : result) as pg.QueryResult<R>);
      }),
    );
  });
}

export function send<R extends pg.QueryResultRow>(
  client: pg.PoolClient,
  query: BoundStatement,
): Promise<pg.QueryResult<R>> {
  return SUBMITS ? submit<R>(client, NO_LEAD, query) : client.query<R>(query);
}

/**
 * Runs `query` with `lead` in one round trip once the connection has prepared it (each lead's ParseComplete would
 * make node-postgres note its name as parsed); otherwise the lead goes first as one simple query.
 */
export async function sendWithLead<R extends pg.QueryResultRow>(
  client: pg.PoolClient,
  lead: readonly string[],
  query: BoundStatement,
): Promise<pg.QueryResult<R>> {
  const protocol = (client as unknown as { connection?: Protocol }).connection;
  if (!SUBMITS || protocol?.parsedStatements?.[query.name] !== query.text) {
    await client.query(lead.join('; '));
    return send<R>(client, query);
  }
  return submit<R>(client, lead, query);
}
