import { type Client, errors, type QueryOptions, types } from 'cassandra-driver';
import { ConfigError, RepositoryError } from '../../errors.js';
import {
  BaseRepository,
  type BaseRepositoryOptions,
  type KeyedClaim,
  type KeyedEntry,
  SCAN_PAGE,
} from '../../store/base.js';
import {
  confirmedRecord,
  forgetAt,
  isLive,
  newRecord,
  renewedRecord,
  storeLifetimeMs,
} from '../../store/record.js';
import type { AddOptions, AddResult, IdempotencyRecord, MarkOptions } from '../../store/types.js';
import { mapLimit as mapConcurrent } from '../../util/concurrency.js';
import {
  chunk,
  ifLive,
  isSameClaim,
  processWarnings,
  type StoreLogger,
  sharedStoreCapabilities,
} from '../shared.js';
import { openClient, statementOptions } from './connection.js';
import { BUCKETS, bucketOf, decodeRow, type Row, type Statements, statements, ttlSeconds } from './cql.js';
import { type CassandraOptions, type CassandraRepositoryOptions, parseCassandraOptions } from './options.js';

/** Rounds of one id's claim-then-takeover (or confirm) while other writers keep winning Paxos rounds. */
const MAX_CAS_ROUNDS = 5;

const MAX_CAS_PAUSE_MS = 50;

/** The outcome of an LWT the server timed out on: it may or may not have been applied. */
const UNKNOWN = Symbol('unknown outcome');

/** Ids per `IN` query: enough to save round trips, few enough not to make one slow request. */
const MAX_IN = 100;

/**
 * Rows and bytes per unlogged batch of lazy marks: under the server's default warn thresholds for batches across
 * partitions (10 partitions, 5 KiB; it refuses over 50 KiB). A mark larger than the budget is a plain INSERT.
 */
const MARK_BATCH_ROWS = 10;
const MARK_BATCH_BYTES = 4 * 1024;

/** A mark's row size in UTF-8 bytes, about. */
function markBytes(entry: KeyedEntry): number {
  const text = (value: string | undefined) => (value === undefined ? 0 : Buffer.byteLength(value, 'utf8'));
  return 64 + text(entry.key) + text(entry.fingerprint) + text(entry.result);
}

/** What {@link CassandraRepository.open} takes besides the config table. */
export interface CassandraOpenExtras extends BaseRepositoryOptions {
  /** A configured `cassandra-driver` Client, used as is and not shut down on `close()`. */
  readonly client?: Client;
  /** Receives one-line warnings (e.g. a clock skew allowed by `onClockSkew: "warn"`); default `process.emitWarning`. */
  readonly logger?: StoreLogger;
}

/**
 * Cassandra store (docs/cassandra.md): claims are lightweight transactions, confirm and owned removal
 * compare-and-set, and a row our clock calls expired is taken over by a compare-and-set on the values read.
 * Liveness is judged by the rows' times, written by each worker's clock, so `open` checks the skew. Lazy marks
 * skip Paxos: a read, then a plain INSERT (concurrent lazy adds of one id may both be added). `markMany` skips
 * the read too (unlogged batches), so a lazy race there is not counted as `raced`.
 */
export class CassandraRepository extends BaseRepository {
  // Single-partition statements; Cassandra's TTL ceiling is 630720000 s, and it advises against cells over 1 MiB.
  readonly capabilities = sharedStoreCapabilities({
    nativeBatch: false,
    maxTtlMs: 630_720_000_000,
    maxResultBytes: 1_048_576,
  });
  protected readonly storeName = 'cassandra';
  readonly #client: Client;
  readonly #ownsClient: boolean;
  readonly #cql: Statements;
  readonly #ns: string;
  readonly #concurrency: number;
  readonly #opts: Record<'read' | 'write' | 'lwt', QueryOptions>;
  /** bigint bind values: numbers for the driver's default Long encoding, BigInt when the client asked for it. */
  readonly #long: (value: number) => number | bigint;

  private constructor(
    client: Client,
    ownsClient: boolean,
    options: CassandraOptions,
    cql: Statements,
    extras: BaseRepositoryOptions,
  ) {
    super(extras);
    this.#client = client;
    this.#ownsClient = ownsClient;
    this.#cql = cql;
    this.#ns = options.namespace;
    this.#concurrency = options.batchConcurrency;
    this.#opts = statementOptions(options);
    const encoding = (client as unknown as { options?: { encoding?: { useBigIntAsLong?: boolean } } }).options
      ?.encoding;
    this.#long = encoding?.useBigIntAsLong ? (value) => BigInt(value) : (value) => value;
  }

  /** Connects, creates the schema (`createSchema`) or checks the table, checks the clock skew. */
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
    const cql = statements(options.keyspace, options.table);
    if (given === undefined && options.contactPoints === undefined) {
      throw new ConfigError('repository.contactPoints', 'is required (or pass an existing client)');
    }
    const warnings = logger ?? processWarnings('IDEM_CASSANDRA');
    const client = await openClient(options, given, clock ?? Date.now, warnings);
    return new CassandraRepository(client, given === undefined, options, cql, { clock });
  }

  protected async doAddMany(entries: readonly KeyedEntry[], options: AddOptions, now: number) {
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
   * Insert-if-absent, else take over a row no longer live, else report the live one. After a Paxos timeout the
   * next round's answer tells whether our own write landed.
   */
  async #claim(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    const record = newRecord(entry.key, entry, options, now);
    const ttl = ttlSeconds(now + storeLifetimeMs(record, now, options.minLifetimeMs), now);
    const where = this.#where(entry.key);
    const insert = [...where, ...this.#values(record, types.unset), ttl];
    const update = [ttl, ...this.#values(record, null), ...where];
    let uncertain = false;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const inserted = await this.#cas(this.#cql.claim, insert);
      if (inserted === UNKNOWN) {
        uncertain = true;
        continue;
      }
      if (inserted.wasApplied()) return { added: true, record };
      // Not applied: Cassandra returns the row that stopped us, every column of it.
      const row = inserted.first();
      const existing = decodeRow(entry.key, row);
      if (uncertain && isSameClaim(existing, record)) return { added: true, record };
      if (existing !== undefined && isLive(existing, now)) return { added: false, existing };
      // Expired by our clock, not yet by its TTL: replace it only if it is still exactly what we read.
      const read = [row.state, row.owner, row.expires_at, row.lease_expires_at].map((cell) => cell ?? null);
      const taken = await this.#cas(this.#cql.takeover, [...update, ...read]);
      if (taken === UNKNOWN) uncertain = true;
      else if (taken.wasApplied()) return { added: true, record };
      // Otherwise someone changed the row between our two rounds: look again at what is there now.
    }
    throw contention('claim', entry.key);
  }

  /** Lazy mark over the row read just before: a plain write if nothing live holds the id. */
  async #mark(entry: KeyedEntry, row: Row | undefined, options: AddOptions, now: number): Promise<AddResult> {
    const existing = ifLive(decodeRow(entry.key, row), now);
    if (existing !== undefined) return { added: false, existing };
    const record = newRecord(entry.key, entry, options, now);
    // Over no row, absent fields stay unset: no null cell (a tombstone) is written for them.
    const absent = row === undefined ? types.unset : null;
    const params = this.#markParams(record, absent, now, options.minLifetimeMs);
    await this.#client.execute(this.#cql.mark, params, this.#opts.write);
    return { added: true, record };
  }

  protected override async doMarkMany(entries: readonly KeyedEntry[], options: MarkOptions, now: number) {
    // Blind over whatever row is left there: null, not unset, for absent fields.
    const params = (e: KeyedEntry) =>
      this.#markParams(newRecord(e.key, e, options, now), null, now, options.minLifetimeMs);
    const groups = chunk(entries, MARK_BATCH_ROWS, markBytes, MARK_BATCH_BYTES);
    await mapConcurrent(groups, Math.max(1, Math.ceil(this.#concurrency / 4)), (group) => {
      const [only] = group;
      // A mark alone (one over the budget) is a plain INSERT: no batch to size.
      if (group.length === 1 && only !== undefined)
        return this.#client.execute(this.#cql.mark, params(only), this.#opts.write);
      const rows = group.map((entry) => ({ query: this.#cql.mark, params: params(entry) }));
      return this.#client.batch(rows, { ...this.#opts.write, logged: false });
    });
    return entries.map(() => true);
  }

  protected async doGetMany(keys: readonly string[], now: number) {
    const rows = await this.#selectMany(keys);
    return keys.map((key) => ifLive(decodeRow(key, rows.get(key)), now));
  }

  protected doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number, now: number): Promise<boolean[]> {
    return mapConcurrent(claims, this.#concurrency, ({ key, owner, result }) =>
      this.#rewriteClaim(key, owner, now, true, ttlMs, result),
    );
  }

  protected override doRenew(key: string, owner: string, leaseMs: number, now: number): Promise<boolean> {
    return this.#rewriteClaim(key, owner, now, false, leaseMs);
  }

  /**
   * Confirms the owner's claim for `ms` (keeping `result`), or renews its lease: reads it, then rewrites its whole
   * row by compare-and-set (an UPDATE's TTL covers only the cells it sets). After a Paxos timeout, a row that is
   * exactly the record that round wrote says it applied.
   */
  async #rewriteClaim(
    key: string,
    owner: string,
    now: number,
    confirm: boolean,
    ms: number,
    result?: string,
  ): Promise<boolean> {
    let uncertain: IdempotencyRecord | undefined;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const row = await this.#select(key);
      const claim = decodeRow(key, row);
      if (uncertain && isSameClaim(claim, uncertain)) return true;
      if (claim === undefined || claim.state !== 'in-flight' || claim.owner !== owner) return false;
      const record = confirm ? confirmedRecord(claim, ms, now, result) : renewedRecord(claim, ms, now);
      const rewrite = [ttlSeconds(forgetAt(record), now), ...this.#values(record, null), ...this.#where(key)];
      const read = [owner, row?.lease_expires_at ?? null, row?.expires_at ?? null];
      const answer = await this.#cas(this.#cql.confirm, [...rewrite, ...read]);
      if (answer === UNKNOWN) {
        uncertain = record;
        continue;
      }
      if (answer.wasApplied()) return true;
      // Not applied: the returned condition columns tell what happened to the claim.
      const current = decodeRow(key, answer.first());
      if (uncertain && isSameClaim(current, uncertain)) return true;
      // Still the owner's in-flight claim (re-claimed, so its lease changed): read again.
      if (current?.state !== 'in-flight' || current.owner !== owner) return false;
    }
    throw contention(confirm ? 'confirm' : 'renew', key);
  }

  protected async doRemove(key: string, owner: string | undefined): Promise<boolean> {
    // An LWT with or without an owner: a plain delete is not ordered with the Paxos writes of a claim or confirm
    // racing it (a ballot's timestamp may run ahead of the delete's), and the record it removed could stay.
    const [query, params] =
      owner === undefined
        ? [this.#cql.remove, this.#where(key)]
        : [this.#cql.removeOwned, [...this.#where(key), owner]];
    let uncertain = false;
    for (let round = 0; round < MAX_CAS_ROUNDS; round++) {
      const result = await this.#cas(query, params);
      if (result === UNKNOWN) {
        uncertain = true;
        continue;
      }
      // After a timed-out round, a row that is now gone was most likely deleted by that round.
      return result.wasApplied() || (uncertain && result.first()?.state == null);
    }
    throw contention('remove', key);
  }

  /** Runs an LWT: {@link UNKNOWN} (after a short random pause) when the server timed out inside the Paxos round. */
  async #cas(query: string, params: unknown[]): Promise<types.ResultSet | typeof UNKNOWN> {
    try {
      return await this.#client.execute(query, params, this.#opts.lwt);
    } catch (error) {
      if (!isPaxosTimeout(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * MAX_CAS_PAUSE_MS));
      return UNKNOWN;
    }
  }

  /** Deletes every bucket partition of this namespace: writes only. */
  protected async doClear(): Promise<void> {
    const buckets = Array.from({ length: BUCKETS }, (_, bucket) => bucket);
    await mapConcurrent(buckets, this.#concurrency, (bucket) =>
      this.#client.execute(this.#cql.removeBucket, [this.#ns, bucket], this.#opts.write),
    );
  }

  /** The namespace's {@link BUCKETS} partitions in turn, a page at a time; fully expired rows are left out. */
  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    for (let bucket = 0; bucket < BUCKETS; bucket++) {
      let pageState: string | undefined;
      do {
        const result = await this.run('scan', () =>
          this.#client.execute(this.#cql.scanBucket, [this.#ns, bucket], {
            ...this.#opts.read,
            fetchSize: SCAN_PAGE,
            ...(pageState === undefined ? {} : { pageState }),
          }),
        );
        const records = result.rows.flatMap((row) => decodeRow(row.id as string, row) ?? []);
        if (records.length > 0) await onPage(records);
        pageState = result.pageState ?? undefined;
      } while (pageState !== undefined);
    }
  }

  protected async doClose(): Promise<void> {
    if (this.#ownsClient) await this.#client.shutdown();
  }

  #where(key: string): [string, number, string] {
    return [this.#ns, bucketOf(key), key];
  }

  async #select(key: string): Promise<Row | undefined> {
    const result = await this.#client.execute(this.#cql.select, this.#where(key), this.#opts.read);
    return result.first() ?? undefined;
  }

  /** One `id IN ?` query per bucket (and per {@link MAX_IN} ids). */
  async #selectMany(keys: readonly string[]): Promise<Map<string, Row | undefined>> {
    if (keys.length === 1) return new Map([[keys[0] as string, await this.#select(keys[0] as string)]]);
    const byBucket = new Map<number, string[]>();
    for (const key of keys) {
      const bucket = bucketOf(key);
      (byBucket.get(bucket) ?? (byBucket.set(bucket, []).get(bucket) as string[])).push(key);
    }
    const queries = [...byBucket].flatMap(([bucket, group]) =>
      chunk(group, MAX_IN).map((ids) => [bucket, ids] as const),
    );
    const rows = new Map<string, Row>();
    await mapConcurrent(queries, this.#concurrency, async ([bucket, ids]) => {
      const result = await this.#client.execute(this.#cql.selectIn, [this.#ns, bucket, ids], this.#opts.read);
      for (const row of result.rows) rows.set(row.id as string, row);
    });
    return rows;
  }

  /** Over a row that may be there, `absent` must be null, not unset, so none of its old values shows through. */
  #markParams(record: IdempotencyRecord, absent: unknown, now: number, minLifetimeMs?: number): unknown[] {
    const ttl = ttlSeconds(now + storeLifetimeMs(record, now, minLifetimeMs), now);
    return [...this.#where(record.id), ...this.#values(record, absent), ttl];
  }

  /** In `RECORD_COLUMNS` order; `absent` fills the missing optional fields. */
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

/** A server timeout during a Paxos round (`writeType` CAS, or a serial read): the LWT may have applied. */
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
