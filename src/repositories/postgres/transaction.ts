import type pg from 'pg';
import { RepositoryError, SwallowedStatementError, toRepositoryError } from '../../errors.js';
import { errorCode } from '../sql/connection.js';
import { detailOf } from '../sql/store.js';
import { SAVEPOINT, SqlTransaction } from '../sql/transaction.js';
import { type BoundStatement, send, sendWithLead } from './connection.js';
import { IN_FAILED_TRANSACTION } from './sql.js';

/**
 * The connection was opened with `lock_timeout` = `lockTimeoutMs` (a startup parameter outranks every default), as
 * the repository's pool opens them: then no SET LOCAL. node-postgres sends only a positive integer.
 */
function opensWith(client: pg.PoolClient, lockTimeoutMs: number): boolean {
  const parameters = (client as { readonly connectionParameters?: { readonly lock_timeout?: unknown } })
    .connectionParameters;
  return Number.isInteger(lockTimeoutMs) && lockTimeoutMs > 0 && parameters?.lock_timeout === lockTimeoutMs;
}

const BEGIN_ONLY: readonly string[] = ['BEGIN'];
/** The last lead made, reused while the lock timeout stays (one entry: a caller may pass a new one each time). */
let lastLead: { readonly lockTimeoutMs: number; readonly lead: readonly string[] } | undefined;

/** BEGIN and the lock timeout (an integer literal: SET takes no parameters). */
function leadOf(lockTimeoutMs: number): readonly string[] {
  if (lastLead?.lockTimeoutMs !== lockTimeoutMs) {
    lastLead = { lockTimeoutMs, lead: ['BEGIN', `SET LOCAL lock_timeout = ${Math.ceil(lockTimeoutMs)}`] };
  }
  return lastLead.lead;
}

/** One open transaction of a `PostgresRepository`. */
export class PostgresTransaction extends SqlTransaction<pg.PoolClient> {
  /** BEGIN sent alone; its failure is for {@link finish}. */
  #began: Promise<unknown> | undefined;
  /** A released savepoint whose RELEASE goes with the next SAVEPOINT, or ends with the transaction. */
  #releasePending = false;
  /**
   * A statement failed, so PostgreSQL refuses every further one until ROLLBACK (TO a savepoint). The verbs then
   * answer without running (rather than a savepoint around each claim, two more round trips per message).
   */
  aborted = false;
  /** Why the connection's state is unknown (it is then destroyed). */
  #broken: Error | undefined;
  // The pool listens only on idle clients: a checked-out one whose connection drops between statements would
  // emit 'error' with no listener and kill the process. Recorded instead; the connection is destroyed.
  readonly #onError = (error: Error) => {
    this.#broken ??= error;
  };

  constructor(client: pg.PoolClient, lockTimeoutMs: number) {
    super(
      'postgres',
      client,
      lockTimeoutMs,
      opensWith(client, lockTimeoutMs) ? BEGIN_ONLY : leadOf(lockTimeoutMs),
    );
    client.on('error', this.#onError);
  }

  async abandon(): Promise<void> {
    this.#broken = await this.rollback();
  }

  async finish(fail: (operation: string, error: unknown) => unknown): Promise<void> {
    try {
      await this.#began;
    } catch (error) {
      this.#broken = error as Error;
      throw fail('transaction', error);
    }
    if (this.rollingBack) {
      this.#broken = await this.rollback();
      if (this.#broken !== undefined) throw fail('rollback', this.#broken);
      return;
    }
    if (!this.started) return;
    let reply: pg.QueryResult;
    try {
      reply = await this.connection.query('COMMIT');
    } catch (error) {
      this.#broken = error as Error;
      // A lost connection leaves the outcome unknown: retrying is safe, since a committed claim answers duplicate.
      throw new RepositoryError(
        `postgres commit failed (the transaction may or may not have committed): ${detailOf(error)}`,
        { cause: error },
      );
    }
    // COMMIT of an aborted transaction answers ROLLBACK, not an error.
    if (reply.command === 'ROLLBACK') {
      throw new RepositoryError(
        'postgres commit rolled back: a statement of the transaction failed earlier and the transaction was ' +
          'aborted; nothing of it was written',
      );
    }
  }

  async close(): Promise<void> {
    this.dispose();
    this.connection.off('error', this.#onError);
    this.connection.release(this.#broken);
  }

  protected handOut(): void {
    const lead = this.takeLead();
    if (lead === undefined) return;
    // Not awaited: node-postgres sends the caller's statements after it, in order.
    this.#began = this.connection.query(lead.join('; '));
    this.#began.catch(() => this.abort());
  }

  /** Runs a statement of the repository's, with the lead when it is the first. */
  send<R extends pg.QueryResultRow>(query: BoundStatement): Promise<pg.QueryResult<R>> {
    const lead = this.takeLead();
    return lead === undefined
      ? send<R>(this.connection, query)
      : sendWithLead<R>(this.connection, lead, query);
  }

  override get rollingBack(): boolean {
    return this.doomed || this.aborted;
  }

  abort(): void {
    this.aborted = true;
  }

  /** Skipped while aborted: nothing to roll back to. Optimistic: none is set (see `RepositoryTransaction`). */
  savepoint(options: { readonly optimistic?: boolean } = {}): Promise<void> {
    return this.openSavepoint(async () => {
      if (this.aborted) return 'skipped';
      if (options.optimistic === true) return this.mark(['query']);
      let state: 'open' | 'skipped' = 'open';
      // The last savepoint's RELEASE first, in the same simple query: savepoints never nest.
      const release = this.#releasePending ? `RELEASE SAVEPOINT ${SAVEPOINT}; ` : '';
      this.#releasePending = false;
      await this.#run('savepoint', `${release}SAVEPOINT ${SAVEPOINT}`, () => {
        state = 'skipped';
      });
      return state;
    });
  }

  /** Ends an optimistic savepoint (false: none); when it cannot stand in, the transaction runs again. */
  #endMark(undo: boolean): boolean {
    const mark = this.takeMark();
    if (mark === undefined) return false;
    if (mark.touched && (undo || this.aborted || !this.#idleInTransaction())) this.needSavepoints();
    return true;
  }

  async releaseSavepoint(): Promise<void> {
    const state = this.takeSavepoint('releaseSavepoint');
    if (state !== 'open' || this.#endMark(false)) return;
    let failure: unknown;
    if (!this.aborted && this.#idleInTransaction()) {
      // Every statement since was answered and the transaction is sound, so RELEASE cannot fail: it can wait.
      this.#releasePending = true;
      return;
    }
    if (!this.aborted) {
      try {
        await this.connection.query(`RELEASE SAVEPOINT ${SAVEPOINT}`);
        return;
      } catch (error) {
        if (errorCode(error) !== IN_FAILED_TRANSACTION) {
          this.abort();
          throw toRepositoryError('postgres releaseSavepoint', error);
        }
        failure = error;
      }
    }
    await this.#undo('releaseSavepoint');
    throw new SwallowedStatementError(
      'postgres releaseSavepoint: a statement after the savepoint failed and its error was caught, so PostgreSQL ' +
        'aborted the transaction (SQLSTATE 25P02); rolled back to the savepoint instead: what was written after ' +
        'it is undone, and the transaction goes on',
      { cause: failure },
    );
  }

  async rollbackToSavepoint(): Promise<void> {
    const state = this.takeSavepoint('rollbackToSavepoint');
    if (state !== 'open' || this.#endMark(true)) return;
    await this.#undo('rollbackToSavepoint');
  }

  /** Rolls back to the savepoint and releases it, which also clears an abort that happened after it. */
  async #undo(operation: string): Promise<void> {
    await this.#run(operation, `ROLLBACK TO SAVEPOINT ${SAVEPOINT}; RELEASE SAVEPOINT ${SAVEPOINT}`);
    this.aborted = false;
  }

  /** No statement in flight, and the last ReadyForQuery said "in a transaction block" (node-postgres 8.8+). */
  #idleInTransaction(): boolean {
    const client = this.connection as unknown as {
      readonly readyForQuery?: boolean;
      getTransactionStatus?(): string | null;
    };
    return client.readyForQuery === true && client.getTransactionStatus?.() === 'T';
  }

  /** `onAborted` handles a transaction the handler already broke. */
  async #run(operation: string, sql: string, onAborted?: () => void): Promise<void> {
    const lead = this.takeLead();
    try {
      await this.connection.query(lead === undefined ? sql : `${lead.join('; ')}; ${sql}`);
    } catch (error) {
      this.abort();
      if (onAborted !== undefined && errorCode(error) === IN_FAILED_TRANSACTION) {
        onAborted();
        return;
      }
      throw toRepositoryError(`postgres ${operation}`, error);
    }
  }
}
