import pg from 'pg';
import { verifiedTls } from '../shared.js';
import { errorCode, openFailure } from '../sql/connection.js';
import type { PostgresOptions } from './options.js';

/** URL parameters that set TLS; dropped when `repository.tls` is given, which then decides alone. */
const URL_TLS_PARAMS = ['ssl', 'sslmode', 'sslcert', 'sslkey', 'sslrootcert', 'uselibpqcompat'];

/**
 * The pool's connection string. node-postgres lets the URL override explicit settings, so the `password` option
 * is written into it (the setter percent-encodes it), and its TLS parameters are taken out when `tls` is given.
 */
function connectionString(options: PostgresOptions): string {
  const url = new URL(options.url as string);
  if (options.password !== undefined) url.password = options.password;
  if (options.tls !== undefined) for (const name of URL_TLS_PARAMS) url.searchParams.delete(name);
  return url.href;
}

/**
 * The pool's client, ending its socket when connecting fails: node-postgres keeps the socket of a connection that
 * fails while authenticating (no password to send), and the pool forgets the client, so the socket would hold the
 * process (`idem migrate`) until the server's authentication_timeout.
 */
class Client extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: (error: Error) => void): void;
  override connect(callback?: (error: Error) => void): Promise<pg.Client> | undefined {
    if (callback === undefined) {
      return super.connect().catch((error: unknown) => {
        this.#hangUp();
        throw error;
      });
    }
    super.connect((error: Error) => {
      if (error) this.#hangUp();
      callback(error);
    });
    return undefined;
  }

  #hangUp(): void {
    this.end().catch(() => undefined);
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

/** See {@link openFailure}. */
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

/** What {@link StatementQuery} uses of node-postgres' connection. */
interface Protocol {
  parse(config: { text: string }): void;
  bind(config: object): void;
  execute(config: object): void;
  readonly parsedStatements?: Record<string, string>;
}

/** A statement of the repository's: a named prepared statement and its parameters. */
export interface BoundStatement {
  readonly name: string;
  readonly text: string;
  readonly values: unknown[];
}

const NO_LEAD: readonly string[] = [];

/**
 * node-postgres' Query for one of the repository's statements, submitted as it is (a config object passed to
 * `query` is first copied property by property, the top JS item of a message's profile). It may write
 * parameterless `lead` statements (BEGIN, SET LOCAL) ahead of its own before the one Sync: one round trip, and an
 * error in any makes the server skip the rest, so the statement never runs when its BEGIN did not.
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

/** Whether this node-postgres has the Query internals {@link StatementQuery} relies on. */
const SUBMITS = typeof (pg.Query.prototype as { prepare?: unknown }).prepare === 'function';

/** Runs `query` through a {@link StatementQuery}: the statement's own result (after one per lead statement). */
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

/** Runs one of the repository's statements on a client it holds (see {@link StatementQuery}). */
export function send<R extends pg.QueryResultRow>(
  client: pg.PoolClient,
  query: BoundStatement,
): Promise<pg.QueryResult<R>> {
  return SUBMITS ? submit<R>(client, NO_LEAD, query) : client.query<R>(query);
}

/**
 * Runs `query` with `lead` in one round trip when the connection has prepared the statement already (each lead
 * statement's ParseComplete makes node-postgres note the query's name as parsed); otherwise the lead goes first
 * as one simple query. Answers the statement's own result.
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
