import type pg from 'pg';
import { RepositoryError } from '../../errors.js';
import type { KeyedClaim, KeyedEntry } from '../../store/base.js';
import { toKey } from '../../store/ids.js';
import { newRecord } from '../../store/record.js';
import { MAX_TTL_MS } from '../../store/ttl.js';
import type {
  AddOptions,
  AddResult,
  IdempotencyRecord,
  MarkOptions,
  MessageId,
  ReadOptions,
} from '../../store/types.js';
import type { StoreLogger } from '../shared.js';
import { errorCode } from '../sql/connection.js';
import {
  handlerClient,
  openSql,
  type SqlOpenExtras,
  SqlRepository,
  type SqlSettings,
  timeParam,
} from '../sql/repository.js';
import { migrateHint } from '../sql/store.js';
import { dialect } from './migration.js';
import type { PostgresOptions, PostgresRepositoryOptions } from './options.js';
import {
  decodeRow,
  decodeText,
  encodeOptional,
  encodeText,
  IN_FAILED_TRANSACTION,
  LOCK_NOT_AVAILABLE,
  type RecordRow,
  type Statement,
  type Statements,
  statements,
  UNDEFINED_TABLE,
} from './sql.js';
import { PostgresTransaction } from './transaction.js';

export type PostgresLogger = StoreLogger;

/** What {@link PostgresRepository.open} takes besides the config table. */
export type PostgresOpenExtras = SqlOpenExtras<pg.Pool>;
export type PostgresOpenOptions = PostgresRepositoryOptions & PostgresOpenExtras;

/** Claims of ids whose live row was gone or lapsed when read (one more for a single id: see `doAdd`). */
const CLAIM_ATTEMPTS = 3;

/** The statement did not run: its transaction is aborted. */
const ABORTED = Symbol('aborted');
/** A claim outside a transaction waited `lock_timeout` for a row another open transaction holds. */
const LOCK_TIMEOUT = Symbol('lock timeout');
type Outcome<R extends pg.QueryResultRow> = pg.QueryResult<R> | typeof ABORTED | typeof LOCK_TIMEOUT;

/**
 * Repository on PostgreSQL through node-postgres (`pg`), one table shared by any number of workers.
 * - A claim is one `INSERT … ON CONFLICT DO UPDATE … WHERE <the row is no longer live>` answering the ids it
 *   took: never a unique-violation error (which would abort the caller's transaction); a new id costs one statement.
 * - The live rows that kept the other ids are read in a second statement, whose newer snapshot also shows a row
 *   committed after the claim began. Inside a transaction the claim locked those rows; outside one, a row gone or
 *   lapsed in between is claimed again. Under REPEATABLE READ such a conflict is SQLSTATE 40001, retryable.
 */
export class PostgresRepository extends SqlRepository<pg.Pool, pg.PoolClient, PostgresTransaction> {
  protected readonly storeName = 'postgres';
  readonly #namespace: string;
  readonly #sql: Statements;

  private constructor(settings: SqlSettings<pg.Pool, PostgresOptions>) {
    super(settings);
    this.#namespace = encodeText(settings.options.namespace);
    this.#sql = statements(settings.options.table);
  }

  static async open(options: PostgresOpenOptions): Promise<PostgresRepository> {
    return new PostgresRepository(await openSql(dialect, options));
  }

  protected readonly maxLockTimeoutMs = MAX_TTL_MS;

  protected async openTransaction(lockTimeoutMs: number): Promise<PostgresTransaction> {
    return new PostgresTransaction(await this.pool.connect(), lockTimeoutMs);
  }

  /**
   * Runs a statement in the current transaction (not at all once it is aborted), else on the pool. A claim's lock
   * timeout is answered (ABORTED in a transaction, now rollback-only; LOCK_TIMEOUT outside one).
   */
  async #exec<R extends pg.QueryResultRow>(
    statement: Statement,
    values: unknown[],
    claim = false,
  ): Promise<Outcome<R>> {
    const query = { name: statement.name, text: statement.text, values };
    const transaction = this.scope.getStore();
    if (transaction === undefined) {
      try {
        return await this.pool.query<R>(query);
      } catch (error) {
        if (claim && errorCode(error) === LOCK_NOT_AVAILABLE) return LOCK_TIMEOUT;
        throw error;
      }
    }
    if (transaction.aborted) return ABORTED;
    try {
      return await transaction.send<R>(query);
    } catch (error) {
      transaction.abort();
      const code = errorCode(error);
      // 25P02: the handler's own statement broke the transaction before this one.
      if (code === IN_FAILED_TRANSACTION) return ABORTED;
      if (claim && code === LOCK_NOT_AVAILABLE) {
        transaction.rollbackOnly();
        return ABORTED;
      }
      throw error;
    }
  }

  async #rows<R extends pg.QueryResultRow>(statement: Statement, values: unknown[]): Promise<R[]> {
    const outcome = await this.#exec<R>(statement, values);
    return typeof outcome === 'symbol' ? [] : outcome.rows;
  }

  async #count(statement: Statement, values: unknown[]): Promise<number | undefined> {
    const outcome = await this.#exec(statement, values);
    return typeof outcome === 'symbol' ? undefined : (outcome.rowCount ?? 0);
  }

  protected missingTable(operation: string, error: unknown): RepositoryError | undefined {
    if (errorCode(error) !== UNDEFINED_TABLE) return undefined;
    return new RepositoryError(
      `postgres ${operation} failed: table ${this.table} does not exist (dropped since the repository opened?); ` +
        migrateHint('postgres', this.table, this.settings.migrateStore),
      { cause: error },
    );
  }

  /** One id (every `wrap` call): `claimNew` first, without the batch path's arrays and maps, then as doAddMany. */
  protected override async doAdd(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    const first = await this.#exec<WriteRow>(this.#sql.claimNew, this.#oneValues(entry, options, now), true);
    const row = typeof first === 'symbol' ? undefined : first.rows[0];
    if (row !== undefined) return { added: true, record: newRecord(entry.key, entry, options, row.now) };
    return (await this.doAddMany([entry], options, now, first))[0] as AddResult;
  }

  /** `first`: the answer of the first claim of `entries`, when {@link doAdd} made it. */
  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
    first?: Outcome<WriteRow>,
  ): Promise<AddResult[]> {
    const results = new Array<AddResult>(entries.length);
    let pending = entries.map((_, i) => i);
    const attempts = first === undefined ? CLAIM_ATTEMPTS : CLAIM_ATTEMPTS + 1;
    for (let attempt = 0; attempt < attempts && pending.length > 0; attempt++) {
      const batch = pending.map((i) => entries[i] as KeyedEntry);
      const outcome = attempt === 0 && first !== undefined ? first : await this.#write(batch, options, now);
      if (outcome === LOCK_TIMEOUT && batch.length > 1) {
        // The statement decided none of its ids; one at a time, only the ids another transaction holds wait.
        const single = await Promise.all(batch.map((entry) => this.doAddMany([entry], options, now)));
        for (let k = 0; k < pending.length; k++) results[pending[k] as number] = single[k]?.[0] as AddResult;
        return results;
      }
      // Aborted, or one id's lock wait ran out: in progress.
      if (typeof outcome === 'symbol') {
        for (const i of pending) results[i] = this.busy((entries[i] as KeyedEntry).key, now);
        return results;
      }
      const taken = new Map(outcome.rows.map((row) => [row.id, row.now]));
      const kept: number[] = [];
      for (const i of pending) {
        const entry = entries[i] as KeyedEntry;
        const at = taken.get(encodeText(entry.key));
        if (at === undefined) kept.push(i);
        else results[i] = { added: true, record: newRecord(entry.key, entry, options, at) };
      }
      if (kept.length === 0) return results;
      // Held by a live row: read in a statement of its own (a newer snapshot). A row gone since is claimed again.
      const existing = await this.doGetMany(
        kept.map((i) => (entries[i] as KeyedEntry).key),
        now,
      );
      pending = [];
      for (const [k, i] of kept.entries()) {
        const record = existing[k];
        if (record === undefined) pending.push(i);
        else results[i] = { added: false, existing: record };
      }
    }
    for (const i of pending) results[i] = this.busy((entries[i] as KeyedEntry).key, now);
    return results;
  }

  #write(entries: readonly KeyedEntry[], options: AddOptions, now: number): Promise<Outcome<WriteRow>> {
    return entries.length === 1
      ? this.#exec<WriteRow>(
          this.#sql.claimOne,
          this.#oneValues(entries[0] as KeyedEntry, options, now),
          true,
        )
      : this.#exec<WriteRow>(this.#sql.claim, this.#writeValues(entries, options, now), true);
  }

  protected override async doMarkMany(
    entries: readonly KeyedEntry[],
    options: MarkOptions,
    now: number,
  ): Promise<boolean[]> {
    const add: AddOptions = { ttlMs: options.ttlMs, minLifetimeMs: options.minLifetimeMs };
    const outcome = await this.#write(entries, add, now);
    if (outcome === ABORTED) return entries.map(() => false);
    if (outcome === LOCK_TIMEOUT) {
      if (entries.length === 1) return [false];
      const single = await Promise.all(entries.map((entry) => this.doMarkMany([entry], options, now)));
      return single.map((marked) => marked[0] === true);
    }
    const taken = new Set(outcome.rows.map((row) => row.id));
    return entries.map((entry) => taken.has(encodeText(entry.key)));
  }

  /** {@link #writeValues} of one entry, as scalars (`claimOne`). */
  #oneValues(entry: KeyedEntry, options: AddOptions, now: number): unknown[] {
    const claim = options.leaseMs !== undefined;
    return [
      this.#namespace,
      timeParam(now),
      encodeText(entry.key),
      entry.eventTime ?? null,
      encodeOptional(entry.fingerprint),
      claim ? null : encodeOptional(entry.result),
      claim ? 'in-flight' : 'confirmed',
      options.ttlMs,
      options.leaseMs ?? null,
      claim ? encodeOptional(options.owner) : null,
      lifetimeOf(options),
    ];
  }

  #writeValues(entries: readonly KeyedEntry[], options: AddOptions, now: number): unknown[] {
    const ids = entries.map((e) => encodeText(e.key));
    // Columns no entry uses go as empty arrays (unnest pads them with NULL): a plain batch sends ids only.
    const eventTimes = entries.some((e) => e.eventTime !== undefined)
      ? entries.map((e) => e.eventTime ?? null)
      : [];
    const fingerprints = entries.some((e) => e.fingerprint !== undefined)
      ? entries.map((e) => encodeOptional(e.fingerprint))
      : [];
    const claim = options.leaseMs !== undefined;
    const results =
      !claim && entries.some((e) => e.result !== undefined)
        ? entries.map((e) => encodeOptional(e.result))
        : [];
    return [
      this.#namespace,
      timeParam(now),
      ids,
      eventTimes,
      fingerprints,
      results,
      claim ? 'in-flight' : 'confirmed',
      options.ttlMs,
      options.leaseMs ?? null,
      claim ? encodeOptional(options.owner) : null,
      lifetimeOf(options),
    ];
  }

  protected async doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    const records = new Array<IdempotencyRecord | undefined>(keys.length).fill(undefined);
    const values = [this.#namespace, keys.map(encodeText), timeParam(now)];
    for (const row of await this.#rows<ReadRow>(this.#sql.read, values)) {
      const index = Number(row.n) - 1;
      records[index] = decodeRow(keys[index] as string, row);
    }
    return records;
  }

  /** One statement that returns positions only: no record (nor its result) crosses the wire. */
  override async containsMany(ids: readonly MessageId[], options: ReadOptions = {}): Promise<boolean[]> {
    this.assertOpen();
    if (ids.length === 0) return [];
    const keys = ids.map((id) => encodeText(toKey(id, this.maxIdBytes)));
    return this.run('containsMany', async () => {
      const found = ids.map(() => false);
      const values = [this.#namespace, keys, timeParam(options.now ?? this.clock())];
      for (const row of await this.#rows<{ n: string }>(this.#sql.contains, values))
        found[Number(row.n) - 1] = true;
      return found;
    });
  }

  override async contains(id: MessageId, options: ReadOptions = {}): Promise<boolean> {
    const [found] = await this.containsMany([id], options);
    return found === true;
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]> {
    // A repeated (id, owner) pair confirms once, like a second confirm after the first.
    const firsts = new Map<string, number>();
    for (const [i, claim] of claims.entries()) {
      const pair = `${claim.key}\u0000${claim.owner}`;
      if (!firsts.has(pair)) firsts.set(pair, i);
    }
    const sent = [...firsts.values()];
    const list = sent.map((i) => claims[i] as KeyedClaim);
    const confirmed = claims.map(() => false);
    const results = list.some((c) => c.result !== undefined) ? list.map((c) => encodeOptional(c.result)) : [];
    const rows = await this.#rows<{ n: string }>(this.#sql.confirm, [
      this.#namespace,
      list.map((c) => encodeText(c.key)),
      list.map((c) => encodeText(c.owner)),
      results,
      ttlMs,
      timeParam(now),
    ]);
    for (const row of rows) confirmed[sent[Number(row.n) - 1] as number] = true;
    return confirmed;
  }

  protected override async doRenew(
    key: string,
    owner: string,
    leaseMs: number,
    now: number,
  ): Promise<boolean> {
    const values = [this.#namespace, encodeText(key), encodeText(owner), leaseMs, timeParam(now)];
    return ((await this.#count(this.#sql.renew, values)) ?? 0) > 0;
  }

  protected async doRemove(key: string, owner: string | undefined, _now: number): Promise<boolean> {
    // The rollback takes the claim away (and the transaction may be aborted already).
    if (this.scope.getStore()?.rollingBack) return true;
    const count =
      owner === undefined
        ? await this.#count(this.#sql.remove, [this.#namespace, encodeText(key)])
        : await this.#count(this.#sql.release, [this.#namespace, encodeText(key), encodeText(owner)]);
    return (count ?? 0) > 0;
  }

  protected async doClear(): Promise<void> {
    await this.#exec(this.#sql.clear, [this.#namespace]);
  }

  protected async scanPage(after: unknown, size: number) {
    const rows = await this.#rows<RecordRow & { id: string }>(this.#sql.scan, [
      this.#namespace,
      after ?? '',
      size,
    ]);
    return { records: rows.map((row) => decodeRow(decodeText(row.id), row)), last: rows.at(-1)?.id };
  }

  /** Each batch is its own short transaction (unless inside {@link transaction}). */
  protected async purgeBatch(batchSize: number): Promise<number | undefined> {
    return this.#count(this.#sql.purge, [batchSize]);
  }
}

/** How long a written row is kept: until the later of retention and lease end, and at least minLifetimeMs. */
function lifetimeOf(options: AddOptions): number {
  return Math.max(options.ttlMs, options.leaseMs ?? 0, options.minLifetimeMs ?? 0);
}

/** An id the claim took (as stored), and its time. */
interface WriteRow {
  readonly id: string;
  readonly now: number;
}

/** A live record and its input position. */
interface ReadRow extends RecordRow {
  readonly n: string;
}

/**
 * The `pg` client {@link postgresTransaction} answers. pg ships no types: without `@types/pg` it would be a
 * silent `any`, so it is then a type whose only member names the package to install.
 */
export type PostgresTransactionClient = unknown extends pg.PoolClient
  ? { readonly 'pg has no types of its own: npm install -D @types/pg': never }
  : pg.PoolClient;

/**
 * The `pg` client of the transaction a handler runs in (`HandlerContext.transaction`), for the side effect: one
 * COMMIT holds the effect and the mark. Throws a ConfigError outside a transaction.
 */
export function postgresTransaction(context: { readonly transaction?: unknown }): PostgresTransactionClient {
  return handlerClient<pg.PoolClient>(context, ['query', 'release'], {
    fn: 'postgresTransaction',
    repository: 'PostgresRepository',
    client: 'a pg client',
  });
}
