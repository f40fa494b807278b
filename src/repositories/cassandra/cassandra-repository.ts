import { type Client, errors, type QueryOptions, types } from 'cassandra-driver';
import { ConfigError, RepositoryError } from '../../errors.js';
import {
  BaseRepository,
  type BaseRepositoryOptions,
  type KeyedClaim,
  type KeyedEntry,
} from '../../store/base.js';
import { MAX_ID_BYTES } from '../../store/ids.js';
import {
  confirmedRecord,
  forgetAt,
  isLive,
  newRecord,
  renewedRecord,
  storeLifetimeMs,
} from '../../store/record.js';
import type {
  AddOptions,
  AddResult,
  IdempotencyRecord,
  MarkOptions,
  RepositoryCapabilities,
} from '../../store/types.js';
import { mapLimit as mapConcurrent } from '../../util/concurrency.js';
import { type CassandraLogger, openClient, processWarnings, statementOptions } from './connection.js';
import { BUCKETS, bucketOf, type Statements, statements, ttlSeconds } from './cql.js';
import { type CassandraOptions, type CassandraRepositoryOptions, parseCassandraOptions } from './options.js';
import { decodeRow, isSameClaim, type Row, toMs } from './row.js';

/**
 * How often one id retries claim-then-takeover (or confirm) when the row keeps changing under it. Each round
 * means another writer won a Paxos round on this very id, so a few rounds settle any real contention.
 */
const MAX_CAS_ROUNDS = 5;

/** Longest random pause before reading back after a Paxos timeout, to let an overloaded node catch up. */
const MAX_CAS_PAUSE_MS = 50;

/** The outcome of an LWT the server timed out on: it may or may not have been applied. */
const UNKNOWN = Symbol('unknown outcome');

/** Ids per `IN` query: enough to save round trips, few enough not to make one slow request. */
const MAX_IN = 100;
/** Rows per `scan` page. */
const SCAN_PAGE = 1000;

/**
 * Rows per unlogged batch of lazy marks. Ten rows of different partitions stay under Cassandra's default
 * `unlogged_batch_across_partitions_warn_threshold` (10) and far under `batch_size_warn_threshold` (5 KiB), so
 * the server logs no warning, while one request carries ten writes.
 */
const MARK_BATCH_ROWS = 10;

/**
 * Bytes of ids, fingerprints and results per unlogged batch of lazy marks. Cassandra refuses a batch of several
 * partitions over `batch_size_fail_threshold` (50 KiB by default) and logs one over `batch_size_warn_threshold`
 * (5 KiB): marks that carry results (the consumer's `storeResult`, up to `maxResultBytes`) are batched up to this
 * budget, and a mark larger than it is written alone, as a plain INSERT.
 */
const MARK_BATCH_BYTES = 4 * 1024;

/** What a mark's row holds beyond its fixed columns, in UTF-8 bytes, plus those columns' share. */
function markBytes(entry: KeyedEntry): number {
  const text = (value: string | undefined) => (value === undefined ? 0 : Buffer.byteLength(value, 'utf8'));
  return 64 + text(entry.key) + text(entry.fingerprint) + text(entry.result);
}

/** Extra arguments of {@link CassandraRepository.open} that cannot come from a config file. */
export interface CassandraOpenExtras extends BaseRepositoryOptions {
  /**
   * An existing, configured `cassandra-driver` Client. The repository uses it as is (its own contact points,
   * auth, policies) and does not shut it down on `close()`.
   */
  readonly client?: Client;
  /** Receives one-line warnings (e.g. a clock skew allowed by `onClockSkew: "warn"`); default `process.emitWarning`. */
  readonly logger?: CassandraLogger;
}

/**
 * Cassandra store. Rows live in `((ns, bucket), id)` (see cql.ts for why); eager claims are lightweight
 * transactions (`INSERT … IF NOT EXISTS`), confirm and owned removal are compare-and-set, and every statement
 * is prepared.
 *
 * Liveness is decided from `expires_at`/`lease_expires_at` by this code: `USING TTL` (from `storeLifetimeMs`, in whole
 * seconds rounded up) only garbage-collects rows, and keeps a claim's row until its retention end, past its lease.
 * A row our clock calls expired but whose TTL has not yet removed it is taken over by a compare-and-set on the exact values read, so two claimers can never both win.
 *
 * Those times come from each worker's clock (CQL conditions cannot compare with the server's time), so `open`
 * measures the skew to the server and refuses, or warns, past `maxClockSkewMs`.
 *
 * Lazy marks (`add` without `leaseMs`) are a read followed by a plain `INSERT … USING TTL`: lazy mode accepts
 * concurrent duplicates by design, so it skips the four-round-trip Paxos of an LWT. Concurrent lazy adds of one
 * id may therefore both report `added: true`; eager claims never do. The lazy consumer's `markMany` skips the read
 * too (its lookup has just read the ids): plain INSERTs in unlogged batches of {@link MARK_BATCH_ROWS} rows,
 * `batchConcurrency / 4` batches in flight (measured on one node: about twice the rate of single INSERTs at
 * `batchConcurrency`, and well over five times that of LWT claims). Such a write is
 * blind: it may replace a row written since that read (a concurrent worker's mark or claim of the same id, which
 * that worker also handled: lazy mode's known race); the id stays held by a live confirmed row, but the race is
 * not seen, so it is not counted as `raced`.
 */
export class CassandraRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: true,
    shared: true,
    maxIdBytes: MAX_ID_BYTES,
    // Bounded-concurrency single-partition statements, not one round trip.
    nativeBatch: false,
    maxTtlMs: 630_720_000_000, // Cassandra's TTL ceiling: 630720000 s, 20 years
    // Cassandra takes cells up to `max_value_size` (256 MiB) but advises against cells above 1 MiB.
    maxResultBytes: 1_048_576,
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
    ({ read: this.#read, write: this.#write, lwt: this.#lwt } = statementOptions(options));
    const encoding = (client as unknown as { options?: { encoding?: { useBigIntAsLong?: boolean } } }).options
      ?.encoding;
    this.#long = encoding?.useBigIntAsLong ? (value) => BigInt(value) : (value) => value;
  }

  /**
   * Connects, creates the keyspace and table when `createSchema` is set (otherwise checks the table exists),
   * checks the clock skew to the server (see `maxClockSkewMs`), and returns the repository. Bad settings reject
   * with a ConfigError naming `repository.<key>`.
   */
  static async open(input: CassandraRepositoryOptions & CassandraOpenExtras): Promise<CassandraRepository> {
    return CassandraRepository.#open(input, 'CassandraRepository.open(...)');
  }

  /** @deprecated Use {@link CassandraRepository.open} (the factory verb of every store); kept for 0.1 users. */
  static async connect(
    input: CassandraRepositoryOptions & CassandraOpenExtras,
  ): Promise<CassandraRepository> {
    return CassandraRepository.#open(input, 'CassandraRepository.connect(...)');
  }

  static async #open(
    input: CassandraRepositoryOptions & CassandraOpenExtras,
    owner: string,
  ): Promise<CassandraRepository> {
    const { client: given, clock, logger, ...config } = input;
    const options = parseCassandraOptions(config, owner);
    // Validates keyspace and table before any connection is made.
    statements(options.keyspace, options.table);
    if (given === undefined && options.contactPoints === undefined) {
      throw new ConfigError('repository.contactPoints', 'is required (or pass an existing client)');
    }
    const client = await openClient(options, {
      given,
      clock: clock ?? Date.now,
      logger: logger ?? processWarnings,
    });
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
    const ttl = ttlSeconds(now + storeLifetimeMs(record, now, options.minLifetimeMs), now);
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
      [
        ...this.#where(entry.key),
        ...this.#values(record, absent),
        ttlSeconds(now + storeLifetimeMs(record, now, options.minLifetimeMs), now),
      ],
      this.#write,
    );
    return { added: true, record };
  }

  protected override async doMarkMany(
    entries: readonly KeyedEntry[],
    options: MarkOptions,
    now: number,
  ): Promise<boolean[]> {
    const add: AddOptions = { ttlMs: options.ttlMs };
    const groups: { query: string; params: unknown[] }[][] = [];
    let group: { query: string; params: unknown[] }[] = [];
    let groupBytes = 0;
    for (const entry of entries) {
      const bytes = markBytes(entry);
      if (group.length === MARK_BATCH_ROWS || (group.length > 0 && groupBytes + bytes > MARK_BATCH_BYTES)) {
        groups.push(group);
        group = [];
        groupBytes = 0;
      }
      const record = newRecord(entry.key, entry, add, now);
      // Blind over whatever row may be left there (e.g. a lapsed claim's owner and lease): absent fields are
      // written as null, never left unset, so no old value shows through the new record.
      const params = [
        ...this.#where(entry.key),
        ...this.#values(record, null),
        ttlSeconds(now + storeLifetimeMs(record, now, options.minLifetimeMs), now),
      ];
      group.push({ query: this.#cql.mark, params });
      groupBytes += bytes;
    }
    if (group.length > 0) groups.push(group);
    const inFlight = Math.max(1, Math.ceil(this.#concurrency / 4));
    await mapConcurrent(groups, inFlight, (rows) => {
      const [only] = rows;
      // A mark alone (one over the budget) is a plain INSERT: no batch to size.
      if (rows.length === 1 && only !== undefined)
        return this.#client.execute(only.query, only.params, this.#write);
      return this.#client.batch(rows, { ...this.#write, logged: false });
    });
    return entries.map(() => true);
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
  async #confirm({ key, owner, result: kept }: KeyedClaim, ttlMs: number, now: number): Promise<boolean> {
    let uncertain: IdempotencyRecord | undefined;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const row = await this.#select(key);
      const claim = decodeRow(key, row);
      // Our earlier round timed out but landed: the row is exactly the confirmed record we wrote.
      if (uncertain && claim?.state === 'confirmed' && claim.expiresAt === uncertain.expiresAt) return true;
      if (claim === undefined || claim.state !== 'in-flight' || claim.owner !== owner) return false;
      const record = confirmedRecord(claim, ttlMs, now, kept);
      const result = await this.#rewrite(key, owner, row, record, now);
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

  /**
   * Rewrites the owner's in-flight row with its lease moved to now + leaseMs, by the same compare-and-set as a
   * confirm (every column is rewritten, so the row's TTL covers them all).
   */
  protected override async doRenew(
    key: string,
    owner: string,
    leaseMs: number,
    now: number,
  ): Promise<boolean> {
    let uncertain: IdempotencyRecord | undefined;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const row = await this.#select(key);
      const claim = decodeRow(key, row);
      if (claim === undefined || claim.state !== 'in-flight' || claim.owner !== owner) return false;
      // Our earlier round timed out but landed: the row holds the lease we wrote.
      if (uncertain && claim.leaseExpiresAt === uncertain.leaseExpiresAt) return true;
      const record = renewedRecord(claim, leaseMs, now);
      const result = await this.#rewrite(key, owner, row, record, now);
      if (result === UNKNOWN) {
        uncertain = record;
        continue;
      }
      if (result.wasApplied()) return true;
      const current = result.first();
      if (current?.state !== 'in-flight' || current?.owner !== owner) return false;
    }
    throw contention('renew', key);
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
  /** Rewrites the owner's in-flight row, read as `row`, as `record` (confirm and renew): applied if unchanged. */
  #rewrite(key: string, owner: string, row: Row | undefined, record: IdempotencyRecord, now: number) {
    return this.#cas(this.#cql.confirm, [
      ttlSeconds(forgetAt(record), now),
      ...this.#values(record, null),
      ...this.#where(key),
      owner,
      row?.lease_expires_at ?? null,
      row?.expires_at ?? null,
    ]);
  }

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

  /**
   * Reads the namespace's {@link BUCKETS} partitions one after the other, each a page at a time (the driver's
   * paging state); see `IdempotentRepository.scan`. A row whose cells have all expired is left out.
   */
  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    for (let bucket = 0; bucket < BUCKETS; bucket++) {
      let pageState: string | undefined;
      do {
        const result = await this.run('scan', () =>
          this.#client.execute(this.#cql.scanBucket, [this.#ns, bucket], {
            ...this.#read,
            fetchSize: SCAN_PAGE,
            ...(pageState === undefined ? {} : { pageState }),
          }),
        );
        const records: IdempotencyRecord[] = [];
        for (const row of result.rows) {
          const record = decodeRow(row.id as string, row);
          if (record !== undefined) records.push(record);
        }
        if (records.length > 0) await onPage(records);
        pageState = result.pageState ?? undefined;
      } while (pageState !== undefined);
    }
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
      record.result ?? absent,
      long(record.firstSeenAt),
    ];
  }
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

/** @deprecated Renamed {@link CassandraOpenExtras} with the factory verb `open`. */
export type CassandraConnectExtras = CassandraOpenExtras;
