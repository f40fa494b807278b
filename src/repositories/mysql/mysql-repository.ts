import { randomInt } from 'node:crypto';
import type { Pool, PoolConnection, ResultSetHeader } from 'mysql2/promise';
import { RepositoryError } from '../../errors.js';
import type { KeyedClaim, KeyedEntry } from '../../store/base.js';
import { newRecord, storeLifetimeMs } from '../../store/record.js';
import type { AddOptions, AddResult, IdempotencyRecord } from '../../store/types.js';
import { chunk, type StoreLogger } from '../shared.js';
import {
  handlerClient,
  openSql,
  type SqlOpenExtras,
  SqlRepository,
  type SqlSettings,
  timeParam,
} from '../sql/repository.js';
import { migrateHint } from '../sql/store.js';
import { blockOf, type Executor, execute, lockWaitSeconds, trackedSessions } from './connection.js';
import { dialect } from './migration.js';
import type { MySqlOptions, MySqlRepositoryOptions } from './options.js';
import {
  bucket,
  bytes,
  decodeRow,
  ER_LOCK_DEADLOCK,
  ER_LOCK_WAIT_TIMEOUT,
  ER_NO_SUCH_TABLE,
  errorNumber as errno,
  MAX_FIELD_BYTES,
  MAX_ROWS,
  MAX_STATEMENT_BYTES,
  optionalBytes,
  type Row,
  SHARE_CLAIM,
  type Statements,
  statements,
  TAKEN_OVER,
  TRACK_LAST_INSERT_ID,
} from './sql.js';
import { MySqlTransaction, type SessionStatements, sessionStatements } from './transaction.js';

/** Rows one `clear()` statement deletes: a large namespace goes in several short transactions. */
const CLEAR_BATCH = 10_000;
/** Rounds of a claim whose rows vanished before their read-back, and of a deadlock victim outside a transaction. */
const MAX_ROUNDS = 5;

export type MySqlLogger = StoreLogger;
/** What {@link MySqlRepository.open} takes besides the config table (a given pool is a mysql2/promise pool). */
export type MySqlOpenExtras = SqlOpenExtras<Pool>;
export type MySqlOpenOptions = MySqlRepositoryOptions & MySqlOpenExtras;

interface ServerTraits {
  /** `innodb_rollback_on_timeout`: a lock wait timeout then rolls back the whole transaction, not one statement. */
  readonly rollbackOnTimeout: boolean;
  /** MariaDB: several statements go in one round trip as a compound statement (see `inOrder`). */
  readonly mariadb: boolean;
}

/** An OK packet with the session state changes mysql2 parses (its types leave them out). */
interface TrackedHeader extends ResultSetHeader {
  readonly stateChanges?: { readonly systemVariables?: Readonly<Record<string, string>> };
}

/** A random token per statement: 52 bits, so the server compares it exactly (see the `token` column). */
function newToken(): number {
  return randomInt(2 ** 47) * 32 + randomInt(32);
}

/**
 * How many rows of an upsert of `rows` rows it left as they were: `affectedRows` counts 1 per insert, 2 per update
 * (+1 per unchanged row under mysql2's CLIENT_FOUND_ROWS), `Duplicates` the updated (+unchanged) rows, so
 * unchanged = rows − affected + duplicates. Undefined without counts (a one-row statement).
 */
function unchangedRows(header: ResultSetHeader, rows: number): number | undefined {
  const duplicates = /Duplicates:\s*(\d+)/.exec(header.info ?? '')?.[1];
  if (duplicates === undefined) return undefined;
  return rows - header.affectedRows + Number(duplicates);
}

interface Lead {
  readonly transaction: MySqlTransaction;
  readonly statements: readonly string[];
}

/** One claim entry (at `index`) as bytes, and its size with the claim's `owner`. */
function claimRow(entry: KeyedEntry, index: number, owner: Buffer | null) {
  const id = bytes(entry.key);
  const fingerprint = optionalBytes(entry.fingerprint);
  checkWidth('fingerprint', fingerprint);
  const result = optionalBytes(entry.result);
  const size = id.length + (fingerprint?.length ?? 0) + (result?.length ?? 0) + (owner?.length ?? 0);
  return { index, key: entry.key, id, fingerprint, result, eventTime: entry.eventTime ?? null, size };
}

type ClaimRow = ReturnType<typeof claimRow>;

function checkWidth(name: string, value: Buffer | null): void {
  if (value !== null && value.length > MAX_FIELD_BYTES) {
    const message = `mysql add: ${name} is ${value.length} bytes; the column holds ${MAX_FIELD_BYTES}`;
    throw new RepositoryError(message, { retryable: false });
  }
}

/** `values` then its last element repeated up to `size` (the spare places of a bucketed statement). */
function padded<T>(values: readonly T[], size: number): T[] {
  return [...values, ...new Array<T>(size - values.length).fill(values.at(-1) as T)];
}

/**
 * Repository on MySQL 8 or MariaDB 10.6+ through mysql2; records can commit in the side effect's transaction.
 * A claim or lazy mark is one multi-row upsert that takes a row only when absent or no longer live and writes the
 * call's random token on the rows it takes. When its OK packet says it left no row alone (the common case) that
 * one round trip answers, else a locking read-back tells by the token which it took. Times are the server's
 * (`@@timestamp`) unless an explicit `now` replaces them.
 */
export class MySqlRepository extends SqlRepository<Pool, PoolConnection, MySqlTransaction> {
  protected readonly storeName = 'mysql';
  readonly #sql: Statements;
  readonly #namespace: Buffer;
  /** The `innodb_lock_wait_timeout` of an owned pool's connections; undefined for a given pool. */
  readonly #poolLockSeconds: number | undefined;
  readonly #server: ServerTraits;
  /** By lock wait in seconds: their blocks are built once. */
  readonly #sessions = new Map<number, SessionStatements>();

  private constructor(settings: SqlSettings<Pool, MySqlOptions>, server: ServerTraits) {
    super(settings);
    const { options } = settings;
    this.#sql = statements(options.table);
    this.#namespace = bytes(options.namespace);
    this.#poolLockSeconds = settings.ownsPool ? lockWaitSeconds(options.lockTimeoutMs) : undefined;
    this.#server = server;
  }

  static async open(input: MySqlOpenOptions): Promise<MySqlRepository> {
    const opened = await openSql(dialect, input, async (pool): Promise<ServerTraits> => {
      const [rows] = await pool.query('SELECT @@innodb_rollback_on_timeout AS value, @@version AS version');
      const row = (rows as { value: unknown; version: unknown }[])[0];
      return { rollbackOnTimeout: Number(row?.value) === 1, mariadb: /mariadb/i.test(String(row?.version)) };
    });
    return new MySqlRepository(opened, opened.probed ?? { rollbackOnTimeout: false, mariadb: false });
  }

  protected readonly maxLockTimeoutMs = Number.MAX_SAFE_INTEGER;

  /** At the session's isolation level: claims and read-backs lock, so they see the latest committed row. */
  protected async openTransaction(lockTimeoutMs: number): Promise<MySqlTransaction> {
    const seconds = lockWaitSeconds(lockTimeoutMs);
    let session = this.#sessions.get(seconds);
    if (session === undefined) {
      session = sessionStatements(seconds, seconds !== this.#poolLockSeconds);
      // A lock timeout per transaction takes few values; past that they are made anew each time.
      if (this.#sessions.size < 16) this.#sessions.set(seconds, session);
    }
    return new MySqlTransaction(
      await this.pool.getConnection(),
      lockTimeoutMs,
      this.#server.mariadb,
      session,
    );
  }

  /** Each batch is its own short transaction at READ COMMITTED: no gap locks, no lock held for long. */
  protected async purgeBatch(batchSize: number): Promise<number> {
    return this.#withDeadlockRetry(undefined, async () => {
      const connection = await this.pool.getConnection();
      try {
        await connection.query('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        const [header] = await connection.execute(this.#sql.purge(batchSize));
        return (header as ResultSetHeader).affectedRows;
      } finally {
        connection.release();
      }
    });
  }

  protected missingTable(operation: string, error: unknown): RepositoryError | undefined {
    if (errno(error) !== ER_NO_SUCH_TABLE) return undefined;
    return new RepositoryError(
      `mysql ${operation} failed: table ${this.#sql.table} does not exist in ${this.settings.address}; ` +
        migrateHint('mysql', this.table, this.settings.migrateStore),
      { cause: error, retryable: false },
    );
  }

  async #executor(transaction: MySqlTransaction | undefined): Promise<Executor> {
    return transaction === undefined ? this.pool : transaction.session();
  }

  #transaction(operation: string): MySqlTransaction | undefined {
    const transaction = this.scope.getStore();
    transaction?.assertUsable(operation);
    return transaction;
  }

  /** Runs a deadlock victim again outside a transaction; inside one, the deadlock lost the whole transaction. */
  async #withDeadlockRetry<T>(transaction: MySqlTransaction | undefined, call: () => Promise<T>): Promise<T> {
    for (let round = 1; ; round++) {
      try {
        return await call();
      } catch (error) {
        if (errno(error) !== ER_LOCK_DEADLOCK) throw error;
        if (transaction !== undefined) {
          transaction.lost('deadlock');
          throw new RepositoryError(
            'mysql: deadlock: the server rolled the transaction back; run it again (retryable)',
            { cause: error },
          );
        }
        if (round >= MAX_ROUNDS) throw error;
        await new Promise((resolve) => setTimeout(resolve, randomInt(5, 50)));
      }
    }
  }

  protected async doAddMany(entries: readonly KeyedEntry[], options: AddOptions, now: number) {
    const transaction = this.#transaction('add');
    const owner = options.leaseMs === undefined ? null : optionalBytes(options.owner);
    checkWidth('owner', owner);
    const rows = entries.map((entry, index) => claimRow(entry, index, owner));
    // In id order: concurrent multi-row claims lock shared rows in the same order and cannot deadlock on them.
    rows.sort((a, b) => Buffer.compare(a.id, b.id));
    // On MariaDB a transaction's start goes in its first claim's round trip (or the one that sets shared values).
    const statements = this.#server.mariadb && rows.length > 0 ? transaction?.takeLead() : undefined;
    let lead =
      statements === undefined ? undefined : { transaction: transaction as MySqlTransaction, statements };
    const executor = await this.#executor(transaction);
    const results = new Array<AddResult>(entries.length);
    let pending = rows;
    for (let round = 1; pending.length > 0; round++) {
      if (round > MAX_ROUNDS) {
        throw new RepositoryError(
          `mysql add: the rows of ${pending.length} ids kept vanishing under the claim`,
        );
      }
      const retry: ClaimRow[] = [];
      const groups = chunk(pending, MAX_ROWS, (row) => row.size, MAX_STATEMENT_BYTES);
      for (let g = 0; g < groups.length; g++) {
        const group = groups[g] as ClaimRow[];
        const carried = lead;
        lead = undefined;
        try {
          await this.#withDeadlockRetry(transaction, () =>
            this.#claimGroup(executor, group, entries, options, owner, now, results, retry, carried),
          );
        } catch (error) {
          if (errno(error) !== ER_LOCK_WAIT_TIMEOUT) throw error;
          // Another open transaction holds one of these ids: the statement was rolled back whole.
          const undecided = [...groups.slice(g).flat(), ...retry];
          for (const row of undecided) results[row.index] = this.busy(row.key, now, options.ttlMs);
          if (this.#server.rollbackOnTimeout)
            transaction?.abort('lock wait timeout with innodb_rollback_on_timeout');
          else transaction?.rollbackOnly();
          return results;
        }
      }
      pending = retry;
    }
    return results;
  }

  /** One claim statement over `group`, after `lead` when given; fills `results`, and `retry` with vanished rows. */
  async #claimGroup(
    executor: Executor,
    group: readonly ClaimRow[],
    entries: readonly KeyedEntry[],
    options: AddOptions,
    owner: Buffer | null,
    now: number,
    results: AddResult[],
    retry: ClaimRow[],
    lead?: Lead,
  ): Promise<void> {
    const base = timeParam(now);
    const token = newToken();
    const state = options.leaseMs === undefined ? 'confirmed' : 'in-flight';
    // The claim's own record decides how long the row is kept (see `forgetAt`), whatever clock `now` is on.
    const lifetime = Math.ceil(storeLifetimeMs(newRecord('', {}, options, 0), 0, options.minLifetimeMs));
    // After a lead, several rows share their values; one row goes in the lead's round trip.
    const shared = lead !== undefined && group.length > 1;
    // Alone, two rows at least: a one-row statement's OK packet has no `Duplicates` count.
    const size = lead === undefined || shared ? Math.max(2, bucket(group.length)) : 1;
    const params: unknown[] = [];
    for (const row of padded(group, size)) {
      if (shared) {
        params.push(row.id, row.eventTime, row.fingerprint, row.result);
        continue;
      }
      params.push(
        this.#namespace,
        row.id,
        state,
        base,
        options.ttlMs,
        base,
        options.leaseMs ?? null,
        owner,
        row.eventTime,
        row.fingerprint,
        row.result,
        lifetime,
        token,
        base,
      );
    }
    params.push(base);
    let taken: boolean;
    let at: number | undefined;
    if (lead === undefined || shared) {
      if (shared) {
        await this.#share(lead, [
          this.#namespace,
          state,
          base,
          options.ttlMs,
          base,
          options.leaseMs ?? null,
          owner,
          lifetime,
          token,
        ]);
      }
      const sql = shared ? this.#sql.claimShared(size) : this.#sql.claim(size);
      const header = await execute<ResultSetHeader>(executor, sql, params);
      at = base ?? (header.insertId > 0 ? Number(header.insertId) : undefined);
      // The spare rows repeat the last one and always count as unchanged.
      taken = unchangedRows(header, size) === size - group.length;
    } else {
      const row = group[0] as ClaimRow;
      // The mark a transaction makes most binds its varying values only (see `statements().markInBlock`).
      const mark =
        base === null && options.leaseMs === undefined
          ? [
              this.#namespace,
              row.id,
              options.ttlMs,
              row.eventTime,
              row.fingerprint,
              row.result,
              lifetime,
              token,
            ]
          : undefined;
      const insertId = await this.#claimAfter(lead, params, mark);
      taken = insertId !== undefined && insertId > 0;
      at = base ?? (taken ? insertId : undefined);
    }
    if (at !== undefined && taken) {
      for (const row of group) {
        const entry = entries[row.index] as KeyedEntry;
        results[row.index] = { added: true, record: newRecord(row.key, entry, options, at) };
      }
      return;
    }
    const found = await this.#readBack(executor, group, token);
    for (const row of group) {
      const stored = found.get(row.key);
      if (stored === undefined) {
        retry.push(row);
        continue;
      }
      const record = decodeRow(stored);
      results[row.index] =
        Number(stored.won) === 1 ? { added: true, record } : { added: false, existing: record };
    }
  }

  /**
   * The lead and a one-row claim as one compound statement, which stops at the first failure, so the claim never
   * runs outside the transaction. Answers the tracked `last_insert_id`: the claim's time when it took the row, 0
   * when it left it (a lapsed row taken over gets the rest of the claim next), undefined when the packet does not
   * say. `mark`: the parameters of `markInBlock` (sql.ts), sent in its place.
   */
  async #claimAfter(
    { transaction, statements }: Lead,
    params: unknown[],
    mark: unknown[] | undefined,
  ): Promise<number | undefined> {
    const { connection } = transaction;
    const claim = mark === undefined ? this.#sql.claimInBlock : this.#sql.markInBlock;
    // A session not tracking `last_insert_id` yet starts to in this round trip.
    const tracked = trackedSessions.has(connection.connection);
    const sql = blockOf(statements, tracked ? claim : `${TRACK_LAST_INSERT_ID}; ${claim}`);
    try {
      const header = await execute<ResultSetHeader>(connection, sql, mark ?? params);
      trackedSessions.add(connection.connection);
      const at = (header as TrackedHeader).stateChanges?.systemVariables?.last_insert_id;
      if (at === undefined) return undefined;
      if (Number(at) !== TAKEN_OVER) return Number(at);
    } catch (error) {
      // A claim's own failures leave the lead done; any other may have stopped it part way.
      const code = errno(error);
      if (code !== ER_LOCK_WAIT_TIMEOUT && code !== ER_LOCK_DEADLOCK) transaction.broken = true;
      throw error;
    }
    const header = await execute<ResultSetHeader>(connection, this.#sql.claim(1), params);
    return header.insertId > 0 ? Number(header.insertId) : undefined;
  }

  /** The lead and the values a batch claim's rows share ({@link SHARE_CLAIM}): one round trip. */
  async #share({ transaction, statements }: Lead, params: unknown[]): Promise<void> {
    try {
      await execute<ResultSetHeader>(transaction.connection, blockOf(statements, SHARE_CLAIM), params);
    } catch (error) {
      // It may have stopped part way: the session's state is unknown.
      transaction.broken = true;
      throw error;
    }
  }

  async #readBack(executor: Executor, group: readonly ClaimRow[], token: number): Promise<Map<string, Row>> {
    const size = bucket(group.length);
    const ids = padded(
      group.map((row) => row.id),
      size,
    );
    const rows = await execute<Row[]>(executor, this.#sql.readBack(size), [token, this.#namespace, ...ids]);
    return new Map(rows.map((row) => [row.id.toString('utf8'), row]));
  }

  protected async doGetMany(keys: readonly string[], now: number) {
    const executor = await this.#executor(this.#transaction('get'));
    const found = new Map<string, IdempotencyRecord>();
    const ids = keys.map(bytes);
    for (const group of chunk(ids, MAX_ROWS, (id) => id.length, MAX_STATEMENT_BYTES)) {
      const size = bucket(group.length);
      const rows = await execute<Row[]>(executor, this.#sql.get(size), [
        this.#namespace,
        ...padded(group, size),
        timeParam(now),
      ]);
      for (const row of rows) {
        const record = decodeRow(row);
        found.set(record.id, record);
      }
    }
    return keys.map((key) => found.get(key));
  }

  protected async doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number) {
    const transaction = this.#transaction('confirm');
    const executor = await this.#executor(transaction);
    const rows = claims.map((claim, index) => ({
      index,
      id: bytes(claim.key),
      owner: bytes(claim.owner),
      result: optionalBytes(claim.result),
    }));
    rows.sort((a, b) => Buffer.compare(a.id, b.id));
    const confirmed = new Array<boolean>(claims.length).fill(false);
    const groups = chunk(
      rows,
      MAX_ROWS,
      (row) => row.id.length * 3 + row.owner.length + (row.result?.length ?? 0),
      MAX_STATEMENT_BYTES,
    );
    for (const group of groups) {
      const size = bucket(group.length);
      const full = padded(group, size);
      const token = newToken();
      const params: unknown[] = [token, ttlMs, ttlMs];
      for (const row of full) params.push(row.id, row.result);
      params.push(this.#namespace);
      for (const row of full) params.push(row.id);
      for (const row of full) params.push(row.id, row.owner);
      const header = await this.#withDeadlockRetry(transaction, () =>
        execute<ResultSetHeader>(executor, this.#sql.confirm(size), params),
      );
      if (header.affectedRows === group.length) {
        for (const row of group) confirmed[row.index] = true;
        continue;
      }
      if (header.affectedRows === 0) continue;
      // Some claims were gone or another owner's: the token says which rows this statement confirmed.
      const mine = await execute<{ id: Buffer }[]>(executor, this.#sql.withToken(size), [
        this.#namespace,
        ...full.map((row) => row.id),
        token,
      ]);
      const ids = new Set(mine.map((row) => row.id.toString('hex')));
      for (const row of group) confirmed[row.index] = ids.has(row.id.toString('hex'));
    }
    // A claim named twice is confirmed by its first occurrence only: the UPDATE changed its row once.
    const done = new Set<string>();
    return confirmed.map((ok, i) => {
      const key = (claims[i] as KeyedClaim).key;
      if (!ok || done.has(key)) return false;
      done.add(key);
      return true;
    });
  }

  protected override async doRenew(key: string, owner: string, leaseMs: number) {
    const params = [newToken(), leaseMs, leaseMs, this.#namespace, bytes(key), bytes(owner)];
    return (await this.#write(this.#transaction('renew'), this.#sql.renew, params)).affectedRows === 1;
  }

  protected async doRemove(key: string, owner: string | undefined): Promise<boolean> {
    const transaction = this.scope.getStore();
    // The rollback takes the claim away, and the transaction may be gone on the server already.
    if (transaction?.rollingBack) return true;
    transaction?.assertUsable('remove');
    const [sql, params] =
      owner === undefined
        ? [this.#sql.remove, [this.#namespace, bytes(key)]]
        : [this.#sql.removeOwned, [this.#namespace, bytes(key), bytes(owner)]];
    return (await this.#write(transaction, sql, params)).affectedRows > 0;
  }

  async #write(
    transaction: MySqlTransaction | undefined,
    sql: string,
    params: unknown[],
  ): Promise<ResultSetHeader> {
    const executor = await this.#executor(transaction);
    return this.#withDeadlockRetry(transaction, () => execute<ResultSetHeader>(executor, sql, params));
  }

  protected async doClear(): Promise<void> {
    const transaction = this.#transaction('clear');
    for (;;) {
      const header = await this.#write(transaction, this.#sql.clear(CLEAR_BATCH), [this.#namespace]);
      if (header.affectedRows < CLEAR_BATCH) return;
    }
  }

  protected async scanPage(after: unknown, size: number) {
    const rows = await execute<Row[]>(this.pool, this.#sql.scan(size), [
      this.#namespace,
      after ?? Buffer.alloc(0),
    ]);
    return { records: rows.map(decodeRow), last: rows.at(-1)?.id };
  }
}

/**
 * The mysql2 connection of the transaction a handler runs in (`HandlerContext.transaction`), for the side effect:
 * one COMMIT holds the effect and the mark. Throws a ConfigError outside a transaction.
 */
export function mysqlTransaction(context: { readonly transaction?: unknown }): PoolConnection {
  // `execute`: a pg client has none.
  return handlerClient(context, ['execute', 'release'], {
    fn: 'mysqlTransaction',
    repository: 'MySqlRepository',
    client: 'a mysql2 connection',
  });
}
