import { auth, Client, errors, policies, type QueryOptions, types } from 'cassandra-driver';
import { ConfigError, RepositoryError } from '../../errors.js';
import { mapLimit as mapConcurrent } from '../../util/concurrency.js';
import { BaseRepository, type BaseRepositoryOptions, type KeyedClaim, type KeyedEntry } from '../base.js';
import { MAX_ID_BYTES } from '../ids.js';
import { confirmedRecord, forgetAt, isLive, newRecord } from '../record.js';
import type { AddOptions, AddResult, IdempotencyRecord, RepositoryCapabilities } from '../types.js';
import {
  BUCKETS,
  bucketOf,
  COLUMNS,
  type Statements,
  schemaStatements,
  statements,
  ttlSeconds,
} from './cql.js';
import {
  type CassandraOptions,
  type CassandraRepositoryOptions,
  type consistencyLevels,
  parseCassandraOptions,
} from './options.js';

type Row = types.Row;

/**
 * How often one id retries claim-then-takeover (or confirm) when the row keeps changing under it. Each round
 * means another writer won a Paxos round on this very id, so a few rounds settle any real contention.
 */
const MAX_CAS_ROUNDS = 5;

/** Longest random pause before reading back after a Paxos timeout, to let an overloaded node catch up. */
const MAX_CAS_PAUSE_MS = 50;

/** The outcome of an LWT the server timed out on: it may or may not have been applied. */
const UNKNOWN = Symbol('unknown outcome');

/** Config names of consistency levels mapped to the driver's enum. */
const CONSISTENCY: Record<
  (typeof consistencyLevels)[number] | 'SERIAL' | 'LOCAL_SERIAL',
  types.consistencies
> = {
  ANY: types.consistencies.any,
  ONE: types.consistencies.one,
  TWO: types.consistencies.two,
  THREE: types.consistencies.three,
  QUORUM: types.consistencies.quorum,
  ALL: types.consistencies.all,
  LOCAL_QUORUM: types.consistencies.localQuorum,
  EACH_QUORUM: types.consistencies.eachQuorum,
  LOCAL_ONE: types.consistencies.localOne,
  SERIAL: types.consistencies.serial,
  LOCAL_SERIAL: types.consistencies.localSerial,
};

/** DDL waits for schema agreement; give it more room than a data request. */
const MIN_DDL_TIMEOUT_MS = 30_000;

/** Ids per `IN` query: enough to save round trips, few enough not to make one slow request. */
const MAX_IN = 100;

/** Extra arguments of {@link CassandraRepository.connect} that cannot come from a config file. */
export interface CassandraConnectExtras extends BaseRepositoryOptions {
  /**
   * An existing, configured `cassandra-driver` Client. The repository uses it as is (its own contact points,
   * auth, policies) and does not shut it down on `close()`.
   */
  readonly client?: Client;
}

/**
 * Cassandra store. Rows live in `((ns, bucket), id)` (see cql.ts for why); eager claims are lightweight
 * transactions (`INSERT … IF NOT EXISTS`), confirm and owned removal are compare-and-set, and every statement
 * is prepared.
 *
 * Liveness is decided from `expires_at`/`lease_expires_at` by this code: `USING TTL` (from `forgetAt`, in whole
 * seconds rounded up) only garbage-collects rows. A row our clock calls expired but whose TTL has not yet
 * removed it is taken over by a compare-and-set on the exact values read, so two claimers can never both win.
 *
 * Lazy marks (`add` without `leaseMs`) are a read followed by a plain `INSERT … USING TTL`: lazy mode accepts
 * concurrent duplicates by design, so it skips the four-round-trip Paxos of an LWT. Concurrent lazy adds of one
 * id may therefore both report `added: true`; eager claims never do.
 */
export class CassandraRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: true,
    shared: true,
    maxIdBytes: MAX_ID_BYTES,
    // Bounded-concurrency single-partition statements, not one round trip.
    nativeBatch: false,
    maxTtlMs: 630_720_000_000, // Cassandra's TTL ceiling: 630720000 s, 20 years
  };
  protected readonly storeName = 'cassandra';
  readonly #client: Client;
  readonly #ownsClient: boolean;
  readonly #cql: Statements;
  readonly #ns: string;
  readonly #concurrency: number;
  readonly #read: QueryOptions;
  readonly #write: QueryOptions;
  readonly #lwt: QueryOptions;
  /** bigint bind values: numbers for the driver's default Long encoding, BigInt when the client asked for it. */
  readonly #long: (value: number) => number | bigint;

  private constructor(
    client: Client,
    ownsClient: boolean,
    options: CassandraOptions,
    extras: BaseRepositoryOptions,
  ) {
    super(extras);
    this.#client = client;
    this.#ownsClient = ownsClient;
    this.#cql = statements(options.keyspace, options.table);
    this.#ns = options.namespace;
    this.#concurrency = options.batchConcurrency;
    const common = { prepare: true, readTimeout: options.requestTimeoutMs };
    this.#read = { ...common, consistency: CONSISTENCY[options.consistency.read], isIdempotent: true };
    this.#write = { ...common, consistency: CONSISTENCY[options.consistency.write], isIdempotent: true };
    this.#lwt = {
      ...common,
      consistency: CONSISTENCY[options.consistency.write],
      serialConsistency: CONSISTENCY[options.serialConsistency],
      // A retried LWT could apply twice or report its own write as someone else's: never retry silently.
      isIdempotent: false,
    };
    const encoding = (client as unknown as { options?: { encoding?: { useBigIntAsLong?: boolean } } }).options
      ?.encoding;
    this.#long = encoding?.useBigIntAsLong ? (value) => BigInt(value) : (value) => value;
  }

  /**
   * Connects, creates the keyspace and table when `createSchema` is set (otherwise checks the table exists),
   * and returns the repository. Bad settings reject with a ConfigError naming `repository.<key>`.
   */
  static async connect(
    input: CassandraRepositoryOptions & CassandraConnectExtras,
  ): Promise<CassandraRepository> {
    const { client: given, clock, ...config } = input;
    const options = parseCassandraOptions(config);
    // Validates keyspace and table before any connection is made.
    statements(options.keyspace, options.table);
    if (given === undefined && options.contactPoints === undefined) {
      throw new ConfigError('repository.contactPoints', 'is required (or pass an existing client)');
    }
    const client = given ?? newClient(options);
    try {
      await client.connect();
      if (options.createSchema) {
        const ddlOptions = { readTimeout: Math.max(options.requestTimeoutMs, MIN_DDL_TIMEOUT_MS) };
        for (const ddl of schemaStatements(options.keyspace, options.table, options.replication)) {
          await client.execute(ddl, [], ddlOptions);
        }
      }
      await assertTable(client, options);
    } catch (error) {
      if (given === undefined) await shutdownAfterFailure(client);
      throw connectError(error);
    }
    return new CassandraRepository(client, given === undefined, options, { clock });
  }

  protected override async doAdd(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    if (options.leaseMs !== undefined) return this.#claim(entry, options, now);
    return this.#mark(entry, await this.#select(entry.key), options, now);
  }

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    if (options.leaseMs !== undefined) {
      // LWTs cannot share a batch across partitions: one Paxos round per id, a bounded number in flight.
      return mapConcurrent(entries, this.#concurrency, (entry) => this.#claim(entry, options, now));
    }
    const rows = await this.#selectMany(entries.map((entry) => entry.key));
    return mapConcurrent(entries, this.#concurrency, (entry) =>
      this.#mark(entry, rows.get(entry.key), options, now),
    );
  }

  /**
   * Eager claim: insert-if-absent, else take over a row that is no longer live, else report the live one.
   * After a Paxos timeout (outcome unknown) the next round's read-back tells whether our own write landed.
   */
  async #claim(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    const record = newRecord(entry.key, entry, options, now);
    const ttl = ttlSeconds(forgetAt(record), now);
    const where = this.#where(entry.key);
    let uncertain = false;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const inserted = await this.#cas(this.#cql.claim, [
        ...where,
        ...this.#values(record, types.unset),
        ttl,
      ]);
      if (inserted === UNKNOWN) {
        uncertain = true;
        continue;
      }
      if (inserted.wasApplied()) return { added: true, record };
      // Not applied: Cassandra returns the row that stopped us, every column of it.
      const row = inserted.first();
      const existing = decodeRow(entry.key, row);
      if (uncertain && existing !== undefined && isSameClaim(existing, record)) {
        return { added: true, record };
      }
      if (existing !== undefined && isLive(existing, now)) return { added: false, existing };
      // Expired by our clock, not yet by its TTL: replace it only if it is still exactly what we read.
      const taken = await this.#cas(this.#cql.takeover, [
        ttl,
        ...this.#values(record, null),
        ...where,
        row.state ?? null,
        row.owner ?? null,
        row.expires_at ?? null,
        row.lease_expires_at ?? null,
      ]);
      if (taken === UNKNOWN) uncertain = true;
      else if (taken.wasApplied()) return { added: true, record };
      // Otherwise someone changed the row between our two rounds: look again at what is there now.
    }
    throw contention('claim', entry.key);
  }

  /** Lazy mark over the row read just before: a plain write if nothing live holds the id (see the class comment). */
  async #mark(entry: KeyedEntry, row: Row | undefined, options: AddOptions, now: number): Promise<AddResult> {
    const existing = decodeRow(entry.key, row);
    if (existing !== undefined && isLive(existing, now)) return { added: false, existing };
    const record = newRecord(entry.key, entry, options, now);
    // Over a leftover row, absent fields must be written as null so its old values do not show through.
    const absent = row === undefined ? types.unset : null;
    await this.#client.execute(
      this.#cql.mark,
      [...this.#where(entry.key), ...this.#values(record, absent), ttlSeconds(forgetAt(record), now)],
      this.#write,
    );
    return { added: true, record };
  }

  protected async doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    const rows =
      keys.length === 1
        ? new Map([[keys[0] as string, await this.#select(keys[0] as string)]])
        : await this.#selectMany(keys);
    return keys.map((key) => {
      const record = decodeRow(key, rows.get(key));
      return record !== undefined && isLive(record, now) ? record : undefined;
    });
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]> {
    return mapConcurrent(claims, this.#concurrency, (claim) => this.#confirm(claim, ttlMs, now));
  }

  /**
   * Reads the claim, then rewrites the whole row with the confirmed record's TTL. Every column is rewritten
   * because an UPDATE's TTL covers only the cells it sets: the claim's event time and fingerprint would
   * otherwise vanish with the short lease TTL.
   */
  async #confirm({ key, owner }: KeyedClaim, ttlMs: number, now: number): Promise<boolean> {
    let uncertain: IdempotencyRecord | undefined;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const row = await this.#select(key);
      const claim = decodeRow(key, row);
      // Our earlier round timed out but landed: the row is exactly the confirmed record we wrote.
      if (uncertain && claim?.state === 'confirmed' && claim.expiresAt === uncertain.expiresAt) return true;
      if (claim === undefined || claim.state !== 'in-flight' || claim.owner !== owner) return false;
      const record = confirmedRecord(claim, ttlMs, now);
      const result = await this.#cas(this.#cql.confirm, [
        ttlSeconds(forgetAt(record), now),
        ...this.#values(record, null),
        ...this.#where(key),
        owner,
        row?.lease_expires_at ?? null,
        row?.expires_at ?? null,
      ]);
      if (result === UNKNOWN) {
        uncertain = record;
        continue;
      }
      if (result.wasApplied()) return true;
      // Not applied: the returned condition columns tell what happened to the claim.
      const current = result.first();
      if (uncertain && current?.state === 'confirmed' && toMs(current.expires_at) === uncertain.expiresAt) {
        return true;
      }
      // Still the same owner's in-flight claim (re-claimed, so its lease changed): read again.
      if (current?.state !== 'in-flight' || current?.owner !== owner) return false;
    }
    throw contention('confirm', key);
  }

  protected async doRemove(key: string, owner: string | undefined, _now: number): Promise<boolean> {
    if (owner !== undefined) {
      let uncertain = false;
      for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
        const result = await this.#cas(this.#cql.removeOwned, [...this.#where(key), owner]);
        if (result === UNKNOWN) {
          uncertain = true;
          continue;
        }
        // After a timed-out round, a row that is now gone was most likely deleted by that round.
        return result.wasApplied() || (uncertain && result.first()?.state == null);
      }
      throw contention('remove', key);
    }
    // A plain delete cannot tell whether it removed anything, so read first; nothing there means nothing to do.
    if ((await this.#select(key)) === undefined) return false;
    await this.#client.execute(this.#cql.remove, this.#where(key), this.#write);
    return true;
  }

  /**
   * Runs an LWT. A server timeout inside the Paxos round leaves its outcome unknown (it may still be applied);
   * that returns {@link UNKNOWN} after a short random pause, and the caller reads back to find out.
   */
  async #cas(query: string, params: unknown[]): Promise<types.ResultSet | typeof UNKNOWN> {
    try {
      return await this.#client.execute(query, params, this.#lwt);
    } catch (error) {
      if (!isPaxosTimeout(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * MAX_CAS_PAUSE_MS));
      return UNKNOWN;
    }
  }

  /** Deletes every bucket partition of this namespace: writes only, however many rows it held. */
  protected async doClear(): Promise<void> {
    const buckets = Array.from({ length: BUCKETS }, (_, bucket) => bucket);
    await mapConcurrent(buckets, this.#concurrency, (bucket) =>
      this.#client.execute(this.#cql.removeBucket, [this.#ns, bucket], this.#write),
    );
  }

  protected async doClose(): Promise<void> {
    if (this.#ownsClient) await this.#client.shutdown();
  }

  /** Bind values of the primary key. */
  #where(key: string): [string, number, string] {
    return [this.#ns, bucketOf(key), key];
  }

  async #select(key: string): Promise<Row | undefined> {
    const result = await this.#client.execute(this.#cql.select, this.#where(key), this.#read);
    return result.first() ?? undefined;
  }

  /** Rows of many keys: one `id IN ?` query per bucket (and per {@link MAX_IN} ids), a bounded number in flight. */
  async #selectMany(keys: readonly string[]): Promise<Map<string, Row>> {
    const byBucket = new Map<number, string[]>();
    for (const key of keys) {
      const bucket = bucketOf(key);
      const group = byBucket.get(bucket);
      if (group === undefined) byBucket.set(bucket, [key]);
      else group.push(key);
    }
    const queries: [number, string[]][] = [];
    for (const [bucket, group] of byBucket) {
      for (let i = 0; i < group.length; i += MAX_IN) queries.push([bucket, group.slice(i, i + MAX_IN)]);
    }
    const rows = new Map<string, Row>();
    await mapConcurrent(queries, this.#concurrency, async ([bucket, ids]) => {
      const result = await this.#client.execute(this.#cql.selectIn, [this.#ns, bucket, ids], this.#read);
      for (const row of result.rows) rows.set(row.id as string, row);
    });
    return rows;
  }

  /** The record's columns in {@link RECORD_COLUMNS} order; `absent` fills the missing optional fields. */
  #values(record: IdempotencyRecord, absent: unknown): unknown[] {
    const long = (value: number | undefined) => (value === undefined ? absent : this.#long(value));
    return [
      record.state,
      this.#long(record.expiresAt),
      long(record.leaseExpiresAt),
      record.owner ?? absent,
      long(record.eventTime),
      record.fingerprint ?? absent,
    ];
  }
}

function newClient(options: CassandraOptions): Client {
  return new Client({
    contactPoints: options.contactPoints,
    localDataCenter: options.localDataCenter,
    ...(options.username !== undefined
      ? { authProvider: new auth.PlainTextAuthProvider(options.username, options.password ?? '') }
      : {}),
    socketOptions: {
      connectTimeout: options.connectTimeoutMs,
      readTimeout: options.requestTimeoutMs,
    },
    // Reconnect within seconds, not the default ten minutes, after a node comes back.
    policies: { reconnection: new policies.reconnection.ExponentialReconnectionPolicy(500, 10_000, false) },
  });
}

/**
 * Shuts down a client of ours whose start failed. cassandra-driver 4.10 keeps the control connection's socket
 * open when `connect()` fails after that socket opened (a wrong localDataCenter does it), and `shutdown()` of a
 * never-connected client skips it; the open socket would keep the process alive, so it is closed here.
 */
async function shutdownAfterFailure(client: Client): Promise<void> {
  const internal = client as unknown as {
    controlConnection?: { connection?: { closeAsync?: () => Promise<void> } | null };
  };
  const leaked = internal.controlConnection?.connection;
  await client.shutdown().catch(() => undefined);
  await leaked?.closeAsync?.().catch(() => undefined);
}

/**
 * Checks the table has this layout. With `createSchema` off, a missing keyspace or table is a config problem
 * reported before any message; with it on, a same-named table of another shape would fail every statement.
 */
async function assertTable(client: Client, options: CassandraOptions): Promise<void> {
  const local = {
    prepare: true,
    consistency: types.consistencies.localOne,
    readTimeout: options.requestTimeoutMs,
  };
  const where = `table "${options.keyspace}"."${options.table}"`;
  const columns = await client.execute(
    'SELECT column_name, kind, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?',
    [options.keyspace, options.table],
    local,
  );
  if (columns.rowLength === 0) {
    const keyspace = await client.execute(
      'SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?',
      [options.keyspace],
      local,
    );
    if (keyspace.rowLength === 0) {
      throw new ConfigError(
        'repository.keyspace',
        `keyspace "${options.keyspace}" does not exist; create it or set repository.createSchema = true`,
      );
    }
    throw new ConfigError(
      'repository.table',
      `${where} does not exist; create it or set repository.createSchema = true`,
    );
  }
  const actual = new Map(columns.rows.map((row) => [row.column_name as string, row]));
  for (const [name, { type, kind }] of Object.entries(COLUMNS)) {
    const column = actual.get(name);
    if (column?.type !== type || column?.kind !== kind) {
      throw new ConfigError(
        'repository.table',
        `${where} does not have the expected layout: column ${name} should be a ${kind} ${type} ` +
          '(PRIMARY KEY ((ns, bucket), id)); use another table name or recreate it',
      );
    }
  }
}

/** Maps a failure while opening the store to the setting most likely at fault. */
function connectError(error: unknown): unknown {
  if (error instanceof ConfigError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof errors.NoHostAvailableError) {
    const inner = Object.entries((error.innerErrors ?? {}) as Record<string, unknown>);
    const detail = hostErrors(inner);
    if (inner.some(([, e]) => e instanceof errors.AuthenticationError)) {
      return new ConfigError('repository.username', `authentication failed: ${detail}`, { cause: error });
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

/** `host: reason` per contact point, first line only (the driver's own message embeds stack traces). */
function hostErrors(inner: [string, unknown][]): string {
  if (inner.length === 0) return 'no host tried';
  return inner
    .map(([host, e]) => `${host}: ${(e instanceof Error ? e.message : String(e)).split('\n')[0]}`)
    .join('; ');
}

function contention(operation: string, key: string): RepositoryError {
  return new RepositoryError(
    `cassandra ${operation} of ${JSON.stringify(key)} gave up after ${MAX_CAS_ROUNDS} contended rounds`,
  );
}

/** True for a server timeout during a Paxos round (`writeType` CAS, or a serial read): the LWT may have applied. */
function isPaxosTimeout(error: unknown): boolean {
  if (!(error instanceof errors.ResponseError)) return false;
  const { writeType, consistencies } = error as errors.ResponseError & {
    writeType?: string;
    consistencies?: types.consistencies;
  };
  const serial =
    consistencies === types.consistencies.serial || consistencies === types.consistencies.localSerial;
  if (error.code === types.responseErrorCodes.writeTimeout) return writeType === 'CAS' || serial;
  return error.code === types.responseErrorCodes.readTimeout && serial;
}

/** True when a stored record is exactly the claim we tried to write (our own timed-out write that landed). */
function isSameClaim(stored: IdempotencyRecord, ours: IdempotencyRecord): boolean {
  return (
    stored.state === ours.state &&
    stored.owner === ours.owner &&
    stored.expiresAt === ours.expiresAt &&
    stored.leaseExpiresAt === ours.leaseExpiresAt
  );
}

/** The record a row holds; undefined for no row, or a row whose cells have all expired (state is gone). */
function decodeRow(key: string, row: Row | null | undefined): IdempotencyRecord | undefined {
  if (!row || (row.state !== 'in-flight' && row.state !== 'confirmed')) return undefined;
  const lease = toMs(row.lease_expires_at);
  const eventTime = toMs(row.event_time);
  return {
    id: key,
    state: row.state,
    expiresAt: toMs(row.expires_at) ?? 0,
    ...(lease !== undefined ? { leaseExpiresAt: lease } : {}),
    ...(row.owner != null ? { owner: row.owner as string } : {}),
    ...(eventTime !== undefined ? { eventTime } : {}),
    ...(row.fingerprint != null ? { fingerprint: row.fingerprint as string } : {}),
  };
}

/** A bigint cell as epoch ms, whichever representation the client decodes to. */
function toMs(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  return (value as types.Long).toNumber();
}
