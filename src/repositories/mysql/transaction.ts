import type { PoolConnection } from 'mysql2/promise';
import { errorMessage, RepositoryError, toRepositoryError } from '../../errors.js';
import { endQuietly, SAVEPOINT, SqlTransaction } from '../sql/transaction.js';
import { inOrder } from './connection.js';
import { ER_LOCK_DEADLOCK, ER_SP_DOES_NOT_EXIST, errorNumber as errno } from './sql.js';

const SERVER_STATUS_IN_TRANS = 0x0001;

/** What a transaction runs besides its work, for a lock wait of `seconds` (set unless the pool has it). */
export function sessionStatements(seconds: number, setLockWait: boolean) {
  const reset = setLockWait
    ? 'SET SESSION autocommit = @idem_autocommit, SESSION innodb_lock_wait_timeout = @idem_lock_wait'
    : 'SET SESSION autocommit = @idem_autocommit';
  return {
    /** The session settings, then the transaction's savepoint. */
    lead: [
      setLockWait
        ? 'SET @idem_autocommit = @@SESSION.autocommit, @idem_lock_wait = @@SESSION.innodb_lock_wait_timeout, ' +
          `SESSION innodb_lock_wait_timeout = ${seconds}, SESSION autocommit = 0`
        : 'SET @idem_autocommit = @@SESSION.autocommit, SESSION autocommit = 0',
      `SAVEPOINT ${TRANSACTION_SAVEPOINT}`,
    ],
    /** The session's settings back: after COMMIT or ROLLBACK only (turning autocommit on would commit). */
    reset,
    /** Before COMMIT: the savepoint's release, then {@link reset}. */
    end: [`RELEASE SAVEPOINT ${TRANSACTION_SAVEPOINT}`, reset],
  } as const;
}

export type SessionStatements = ReturnType<typeof sessionStatements>;

/** Set first and released just before COMMIT: its absence proves the server rolled the transaction back. */
const TRANSACTION_SAVEPOINT = 'idempotent_consumer_transaction';

/**
 * One open MySQL transaction: a pool connection with autocommit off. Not START TRANSACTION: when InnoDB rolls the
 * whole transaction back on its own (a deadlock victim; a lock wait timeout under `innodb_rollback_on_timeout`),
 * that session is back in autocommit and the work's later statements would commit without its mark; with
 * autocommit off they open a new transaction that only COMMIT ends, and {@link TRANSACTION_SAVEPOINT} tells
 * before COMMIT (everything then rolls back and the call rejects, retryable).
 */
export class MySqlTransaction extends SqlTransaction<PoolConnection> {
  /** The session's state is unknown: destroyed, never reused. */
  broken = false;
  #ended = false;
  /** Why the server rolled the transaction back (a deadlock), when it did. */
  #abortedBy: string | undefined;
  /** Set by {@link lost}. */
  rolledBackBy: string | undefined;
  readonly #compound: boolean;
  #began: Promise<unknown> | undefined;
  readonly #session: SessionStatements;
  /** The session's settings are back (which ended the transaction). */
  #restored = false;

  constructor(
    connection: PoolConnection,
    lockTimeoutMs: number,
    compound: boolean,
    session: SessionStatements,
  ) {
    super('mysql', connection, lockTimeoutMs, session.lead);
    this.#compound = compound;
    this.#session = session;
  }

  async abandon(): Promise<void> {
    await this.begun();
    if ((await this.rollback()) !== undefined) this.broken = true;
    this.end();
  }

  async finish(fail: (operation: string, error: unknown) => unknown): Promise<void> {
    this.end();
    await this.begun();
    if (this.started && !this.rollingBack) {
      try {
        await this.#commit();
      } catch (error) {
        throw fail('commit', error);
      }
    }
    if (this.rollingBack) {
      if ((await this.rollback()) !== undefined) this.broken = true;
      if (this.rolledBackBy !== undefined) {
        throw new RepositoryError(
          `mysql transaction: the server rolled the transaction back while the work ran (${this.rolledBackBy}); ` +
            'nothing of it was committed; run it again',
        );
      }
    }
  }

  async #commit(): Promise<void> {
    try {
      // Turning autocommit back on commits; the release failing stops the commit.
      const header = await inOrder(this.connection, this.#session.end, this.#compound);
      this.#restored = true;
      // A session that had autocommit off is still in the transaction (the OK packet says so): COMMIT ends it.
      if ((header.serverStatus & SERVER_STATUS_IN_TRANS) !== 0) await this.connection.query('COMMIT');
    } catch (error) {
      if (this.#restored || errno(error) !== ER_SP_DOES_NOT_EXIST) {
        this.broken = true;
        throw error;
      }
      this.lost(
        'a deadlock, or a lock wait timeout with innodb_rollback_on_timeout, in a statement whose error the ' +
          'work caught',
      );
    }
  }

  async close(): Promise<void> {
    if (!this.broken && this.started && !this.#restored) {
      this.broken = (await endQuietly(this.connection, this.#session.reset)) !== undefined;
    }
    if (this.broken) this.connection.destroy();
    else this.connection.release();
  }

  protected handOut(): void {
    if (this.started) return;
    // Not awaited: mysql2 sends the caller's statements after it, in order. Its failure ends the transaction.
    this.#sendLead().catch((error: unknown) => {
      this.broken = true;
      this.abort(`its start failed: ${errorMessage(error)}`);
    });
  }

  /** The connection, once the lead went (alone, when it had not). */
  async session(): Promise<PoolConnection> {
    this.counted();
    if (!this.started) void this.#sendLead().catch(() => {});
    try {
      await this.#began;
    } catch (error) {
      this.broken = true;
      throw error;
    }
    return this.connection;
  }

  async begun(): Promise<void> {
    await this.#began?.catch(() => {});
  }

  #sendLead(): Promise<unknown> {
    const lead = this.takeLead() as readonly string[];
    // Without a compound statement, each is queued at once, so that nothing of the caller's goes between them.
    this.#began = this.#compound
      ? inOrder(this.connection, lead, true)
      : Promise.all(lead.map((sql) => this.connection.query(sql)));
    return this.#began;
  }

  /** Optimistic: sets none. */
  savepoint(options: { readonly optimistic?: boolean } = {}): Promise<void> {
    return this.openSavepoint(async () => {
      if (options.optimistic === true) {
        this.assertUsable('savepoint');
        return this.mark(['query', 'execute']);
      }
      await this.#statement('savepoint', `SAVEPOINT ${SAVEPOINT}`);
      return 'open';
    });
  }

  /** Sends nothing: the next `SAVEPOINT` of the same name replaces this one, and the transaction's end drops it. */
  async releaseSavepoint(): Promise<void> {
    this.takeSavepoint('releaseSavepoint');
    this.takeMark();
    this.assertUsable('releaseSavepoint');
  }

  /** MySQL keeps the savepoint after `ROLLBACK TO`; the next `SAVEPOINT` of the same name replaces it. */
  async rollbackToSavepoint(): Promise<void> {
    this.takeSavepoint('rollbackToSavepoint');
    const mark = this.takeMark();
    if (mark !== undefined) {
      if (!mark.touched) return;
      // Back to the transaction's own savepoint, which also finds out whether the server rolled it back already.
      await this.#statement('rollbackToSavepoint', `ROLLBACK TO SAVEPOINT ${TRANSACTION_SAVEPOINT}`);
      this.needSavepoints();
      return;
    }
    await this.#statement('rollbackToSavepoint', `ROLLBACK TO SAVEPOINT ${SAVEPOINT}`);
  }

  /** The server rolled the transaction back: later verbs refuse to run, and the end is a ROLLBACK. */
  abort(reason: string): void {
    this.#abortedBy ??= reason;
    this.doomed = true;
  }

  /** {@link abort}, for a rollback no verb answered for: the transaction is to be run again. */
  lost(reason: string): void {
    this.abort(reason);
    this.rolledBackBy ??= reason;
  }

  /** `transaction()` ended: a verb still running in its async context may no longer use it. */
  end(): void {
    this.#ended = true;
    this.dispose();
  }

  assertUsable(operation: string): void {
    if (this.#ended) {
      throw new RepositoryError(
        `mysql ${operation}: called in a transaction that has already ended (a verb left running after its ` +
          'transaction() callback returned)',
        { retryable: false },
      );
    }
    if (this.#abortedBy !== undefined) {
      throw new RepositoryError(
        `mysql ${operation}: the server rolled this transaction back (${this.#abortedBy}); nothing more runs in it`,
      );
    }
  }

  async #statement(operation: string, sql: string): Promise<void> {
    this.assertUsable(operation);
    try {
      await (await this.session()).query(sql);
    } catch (error) {
      const code = errno(error);
      // The savepoint went with the whole transaction: a retryable failure of the whole, never of this step alone.
      if (code === ER_SP_DOES_NOT_EXIST || code === ER_LOCK_DEADLOCK) {
        this.lost(
          code === ER_LOCK_DEADLOCK
            ? 'deadlock'
            : 'the savepoint was gone: a deadlock, or a lock wait timeout with innodb_rollback_on_timeout',
        );
        throw new RepositoryError(
          `mysql ${operation}: the server rolled the transaction back (${this.rolledBackBy}); run it again`,
          { cause: error },
        );
      }
      throw toRepositoryError(`mysql ${operation}`, error);
    }
  }
}
