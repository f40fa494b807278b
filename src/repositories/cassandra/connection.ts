import { auth, Client, errors, policies, type QueryOptions, types } from 'cassandra-driver';
import { ConfigError, errorMessage, RepositoryError } from '../../errors.js';
import { type ClockSample, checkSampledClock } from '../clock-skew.js';
import { type StoreLogger, TLS_ERROR_CODES, verifiedTls } from '../shared.js';
import { ADDED_COLUMNS, addColumnStatement, COLUMNS, schemaStatements, toMs } from './cql.js';
import type { CassandraOptions } from './options.js';

/** The driver's consistency level of a config name: `LOCAL_QUORUM` → `types.consistencies.localQuorum`. */
function consistency(name: string): types.consistencies {
  const key = name.toLowerCase().replace(/_(.)/g, (_, letter: string) => letter.toUpperCase());
  return types.consistencies[key as keyof typeof types.consistencies];
}

/** DDL waits for schema agreement. */
const MIN_DDL_TIMEOUT_MS = 30_000;

/** Readings of the server clock at connect; the one with the shortest round trip is kept. */
const CLOCK_SAMPLES = 3;

/** Where the repository reports a degraded but working setup (a clock skew allowed by `onClockSkew: "warn"`). */
export type CassandraLogger = StoreLogger;

/**
 * `timestamp: null` (the driver reads null as "none"; its types say undefined, which means "use the client's
 * generator") has the coordinator stamp plain writes as it stamps LWTs, from one clock. A plain delete or mark
 * stamped by ours could outrank the claim that follows it (a clock ahead, or just the same millisecond): the claim
 * would be written yet unseen, and a second worker could claim the id too.
 */
const SERVER_TIMESTAMP = { timestamp: null } as unknown as Pick<QueryOptions, 'timestamp'>;

/** Driver options of plain reads, plain writes and LWTs. */
export function statementOptions(options: CassandraOptions): Record<'read' | 'write' | 'lwt', QueryOptions> {
  const common = { prepare: true, readTimeout: options.requestTimeoutMs, ...SERVER_TIMESTAMP };
  return {
    read: { ...common, consistency: consistency(options.consistency.read), isIdempotent: true },
    write: { ...common, consistency: consistency(options.consistency.write), isIdempotent: true },
    lwt: {
      ...common,
      consistency: consistency(options.consistency.write),
      serialConsistency: consistency(options.serialConsistency),
      // A retried LWT could apply twice or report its own write as someone else's: never retry silently.
      isIdempotent: false,
    },
  };
}

/**
 * Connects (a `given` client is used as is), creates the schema with `createSchema`, checks the table's layout
 * and the skew of `clock` to the server's.
 */
export async function openClient(
  options: CassandraOptions,
  given: Client | undefined,
  clock: () => number,
  logger: StoreLogger,
): Promise<Client> {
  const client = given ?? newClient(options);
  try {
    await client.connect();
    if (options.createSchema) {
      const ddlOptions = { readTimeout: Math.max(options.requestTimeoutMs, MIN_DDL_TIMEOUT_MS) };
      for (const ddl of schemaStatements(options.keyspace, options.table, options.replication)) {
        await client.execute(ddl, [], ddlOptions);
      }
      await addMissingColumns(client, options, ddlOptions);
    }
    await assertTable(client, options);
    await assertClock(client, options, clock, logger);
  } catch (error) {
    if (given === undefined) await shutdownAfterFailure(client);
    throw connectError(error);
  }
  return client;
}

function newClient(options: CassandraOptions): Client {
  return new Client({
    contactPoints: options.contactPoints,
    localDataCenter: options.localDataCenter,
    ...(options.username !== undefined
      ? { authProvider: new auth.PlainTextAuthProvider(options.username, options.password ?? '') }
      : {}),
    // The driver accepts any certificate by default: verification is on unless turned off by name.
    ...(options.tls ? { sslOptions: verifiedTls(options.tls) } : {}),
    socketOptions: { connectTimeout: options.connectTimeoutMs, readTimeout: options.requestTimeoutMs },
    // Reconnect within seconds, not the default ten minutes, after a node comes back.
    policies: { reconnection: new policies.reconnection.ExponentialReconnectionPolicy(500, 10_000, false) },
  });
}

/**
 * cassandra-driver 4.10 keeps the control connection's socket open when `connect()` fails after it opened (a wrong
 * localDataCenter), and `shutdown()` skips it: it is closed here.
 */
async function shutdownAfterFailure(client: Client): Promise<void> {
  const internal = client as unknown as {
    controlConnection?: { connection?: { closeAsync?: () => Promise<void> } | null };
  };
  const leaked = internal.controlConnection?.connection;
  await client.shutdown().catch(() => undefined);
  await leaked?.closeAsync?.().catch(() => undefined);
}

/** One local replica is enough to read schema and the clock. */
function localOptions(options: CassandraOptions): QueryOptions {
  return { prepare: true, consistency: types.consistencies.localOne, readTimeout: options.requestTimeoutMs };
}

async function tableColumns(client: Client, options: CassandraOptions): Promise<Map<string, types.Row>> {
  const query =
    'SELECT column_name, kind, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?';
  const columns = await client.execute(query, [options.keyspace, options.table], localOptions(options));
  return new Map(columns.rows.map((row) => [row.column_name as string, row]));
}

/** Adds the columns an older table lacks; another worker's concurrent ALTER is fine. */
async function addMissingColumns(
  client: Client,
  options: CassandraOptions,
  ddlOptions: QueryOptions,
): Promise<void> {
  const present = await tableColumns(client, options);
  for (const column of ADDED_COLUMNS) {
    if (present.has(column)) continue;
    await client
      .execute(addColumnStatement(options.keyspace, options.table, column), [], ddlOptions)
      .catch((error: unknown) => {
        if (!/conflicts with an existing column|already exists/i.test(String(error))) throw error;
      });
  }
}

/** A missing or foreign table fails at open, not on a message. */
async function assertTable(client: Client, options: CassandraOptions): Promise<void> {
  const where = `table "${options.keyspace}"."${options.table}"`;
  const actual = await tableColumns(client, options);
  if (actual.size === 0) {
    const query = 'SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?';
    const keyspace = await client.execute(query, [options.keyspace], localOptions(options));
    const [key, missing] =
      keyspace.rowLength === 0
        ? ['repository.keyspace', `keyspace "${options.keyspace}"`]
        : ['repository.table', where];
    throw new ConfigError(key, `${missing} does not exist; create it or set repository.createSchema = true`);
  }
  for (const [name, { type, kind }] of Object.entries(COLUMNS)) {
    const column = actual.get(name);
    if (column === undefined && (ADDED_COLUMNS as readonly string[]).includes(name)) {
      throw new ConfigError(
        'repository.table',
        `${where} predates column ${name}: run \`${addColumnStatement(options.keyspace, options.table, name as keyof typeof COLUMNS)}\` ` +
          'or set repository.createSchema = true',
      );
    }
    if (column?.type !== type || column?.kind !== kind) {
      throw new ConfigError(
        'repository.table',
        `${where} does not have the expected layout: column ${name} should be a ${kind} ${type} ` +
          '(PRIMARY KEY ((ns, bucket), id)); use another table name or recreate it',
      );
    }
  }
}

/** Conditions compare times our clock wrote: checks its skew to the coordinator's. */
async function assertClock(
  client: Client,
  options: CassandraOptions,
  clock: () => number,
  logger: StoreLogger,
): Promise<void> {
  const samples: ClockSample[] = [];
  const query = 'SELECT toUnixTimestamp(now()) AS server_ms FROM system.local';
  for (let i = 0; i < CLOCK_SAMPLES; i++) {
    const localBefore = clock();
    const result = await client.execute(query, [], localOptions(options));
    const localAfter = clock();
    // `toUnixTimestamp` gives epoch ms as a bigint (a Long, or a BigInt with useBigIntAsLong).
    const serverMs = toMs(result.first()?.server_ms);
    if (serverMs === undefined) continue;
    samples.push({ localBefore, localAfter, serverEarliest: serverMs, serverLatest: serverMs });
  }
  const where = (client.getState().getConnectedHosts()[0]?.address as string | undefined) ?? 'the cluster';
  const check = { ...options, store: 'cassandra', where, warn: (m: string) => logger.warn(m) };
  checkSampledClock(samples, check, 'could not read the server clock');
}

function connectError(error: unknown): unknown {
  if (error instanceof ConfigError) return error;
  const message = errorMessage(error);
  if (error instanceof errors.NoHostAvailableError) {
    const inner = Object.entries((error.innerErrors ?? {}) as Record<string, unknown>);
    // First lines only: the driver's messages embed stack traces.
    const detail =
      inner.map(([host, e]) => `${host}: ${errorMessage(e).split('\n')[0]}`).join('; ') || 'no host tried';
    if (inner.some(([, e]) => e instanceof errors.AuthenticationError)) {
      return new ConfigError('repository.username', `authentication failed: ${detail}`, { cause: error });
    }
    if (inner.some(([, e]) => new RegExp(TLS_ERROR_CODES).test(String((e as { code?: unknown })?.code)))) {
      return new ConfigError(
        'repository.tls',
        `TLS connection failed (${detail}); set repository.tls.ca to the PEM of the CA that signed the ` +
          "server's certificate, or check that the server has client encryption enabled",
        { cause: error },
      );
    }
    if (inner.some(([, e]) => e instanceof errors.ArgumentError && /localDataCenter/.test(e.message))) {
      return new ConfigError('repository.localDataCenter', detail, { cause: error });
    }
    return new ConfigError('repository.contactPoints', `no Cassandra node answered (${detail})`, {
      cause: error,
    });
  }
  if (error instanceof errors.ArgumentError && /localDataCenter/.test(message)) {
    return new ConfigError('repository.localDataCenter', message, { cause: error });
  }
  return new RepositoryError(`cassandra connect failed: ${message}`, { cause: error });
}
