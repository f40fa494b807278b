import type { PoolConnection, ResultSetHeader } from 'mysql2/promise';
import { RepositoryError, toRepositoryError } from '../../errors.js';
import { endQuietly, SAVEPOINT, SqlTransaction } from '../sql/transaction.js';
import { ER_LOCK_DEADLOCK, ER_SP_DOES_NOT_EXIST, errorNumber as errno, inOrder } from './connection.js';

/** The OK packet's status flag: a transaction is open on the session. */
const SERVER_STATUS_IN_TRANS = 0x0001;

/** What a transaction runs on its session besides its work, for one lock wait. */
export interface SessionStatements {
  /** The session settings, then the transaction's savepoint: sent with the work's first statement. */
  readonly lead: readonly string[];
  /** The session's settings back: after COMMIT or ROLLBACK only (turning autocommit on would commit). */
  readonly reset: string;
  /** Before COMMIT: the savepoint's release, then {@link reset}. */
  readonly end: readonly string[];
}

/** The session statements for a lock wait of `seconds`, set unless the pool's connections have it (`setLockWait`). */
export function sessionStatements(seconds: number, setLockWait: boolean): SessionStatements {
  const reset = setLockWait
    ? 'SET SESSION autocommit = @idem_autocommit, SESSION innodb_lock_wait_timeout = @idem_lock_wait'
    : 'SET SESSION autocommit = @idem_autocommit';
  return {
    lead: [
      setLockWait
        ? 'SET @idem_autocommit = @@SESSION.autocommit, @idem_lock_wait = @@SESSION.innodb_lock_wait_timeout, ' +
          `SESSION innodb_lock_wait_timeout = ${seconds}, SESSION autocommit = 0`
        : 'SET @idem_autocommit = @@SESSION.autocommit, SESSION autocommit = 0',
      `SAVEPOINT ${TRANSACTION_SAVEPOINT}`,
    ],
    reset,
    end: [`RELEASE SAVEPOINT ${TRANSACTION_SAVEPOINT}`, reset],
  };
}

/**
 * The savepoint `transaction()` sets first and releases just before COMMIT: it dies with the transaction that set
 * it, so its absence proves the server rolled that transaction back. Set before {@link SAVEPOINT}, so rolling
 * back to or releasing that one leaves it standing.
 */
const TRANSACTION_SAVEPOINT = 'idempotent_consumer_transaction';

/**
 * One open MySQL transaction: a pool connection with autocommit off, and what the repository learned of it.
 *
 * The session runs with `autocommit = 0` rather than inside START TRANSACTION: when InnoDB rolls the whole
 * transaction back on its own (a deadlock victim; a lock wait timeout under `innodb_rollback_on_timeout`), a
 * session in START TRANSACTION is back in autocommit and the work's later statements would commit without its
 * mark; with autocommit off they open a new transaction that only COMMIT ends. The savepoint set first
 * ({@link TRANSACTION_SAVEPOINT}) dies with the transaction, so `RELEASE SAVEPOINT` before COMMIT proves it is
 * still the one opened here; when not, everything is rolled back and the call rejects, retryable.
 *
 * The settings and the savepoint go with the work's first statement (on MariaDB in a one-id claim's round
 * trip), and the release and the settings' return (which commits) in one: one message in its own transaction
 * costs the round trips of BEGIN, INSERT, COMMIT.
 */
export class MySqlTransaction extends SqlTransaction<PoolConnection> {
  /** The lead failed, or a round trip carrying it: the session's settings are unknown, the connection not reused. */
  broken = false;
  #ended = false;
  /** Why the server rolled the transaction back (a deadlock), when it did. */
  #abortedBy: string | undefined;
  /** Set when the server's rollback was not answered for by a verb (see `rolledBackBy`). */
  #rolledBackBy: string | undefined;
  readonly #compound: boolean;
  /** The lead sent alone, not yet answered. */
  #began: Promise<unknown> | undefined;

  readonly #session: SessionStatements;
  /** Once false, the session's state is unknown: the connection is destroyed, never restored or reused. */
  #healthy = true;
  /** Set once the session's settings are back (which ended the transaction). */
  #restored = false;

  /** The session's lead goes with the first claim in its round trip, else alone before any other statement. */
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
    this.#healthy = (await this.rollback()) === undefined;
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
      this.#healthy = (await this.rollback()) === undefined;
      if (this.rolledBackBy !== undefined) {
        throw new RepositoryError(
          `mysql transaction: the server rolled the transaction back while the work ran (${this.rolledBackBy}); ` +
            'nothing of it was committed; run it again',
        );
      }
    }
  }

  async #commit(): Promise<void> {
    let header: ResultSetHeader;
    try {
      // Turning autocommit back on commits; the release failing stops the commit.
      header = await inOrder(this.connection, this.#session.end, this.#compound);
    } catch (error) {
      if (errno(error) !== ER_SP_DOES_NOT_EXIST) {
        this.#healthy = false;
        throw error;
      }
      this.lost(
        'a deadlock, or a lock wait timeout with innodb_rollback_on_timeout, in a statement whose error the ' +
          'work caught',
      );
      return;
    }
    this.#restored = true;
    try {
      // A session that had autocommit off is still in the transaction (the OK packet says so): COMMIT ends it.
      if ((header.serverStatus & SERVER_STATUS_IN_TRANS) !== 0) await this.connection.query('COMMIT');
    } catch (error) {
      this.#healthy = false;
      throw error;
    }
  }

  async close(): Promise<void> {
    if (this.broken) this.#healthy = false;
    if (this.#healthy && this.started && !this.#restored) {
      this.#healthy = (await endQuietly(this.connection, this.#session.reset)) === undefined;
    }
    if (this.#healthy) this.connection.release();
    else this.connection.destroy();
  }

  protected handOut(): void {
    if (this.started) return;
    // Not awaited: mysql2 sends the caller's statements after it, in order. Its failure ends the transaction.
    this.#sendLead().catch((error: unknown) => {
      this.broken = true;
      this.abort(`its start failed: ${error instanceof Error ? error.message : String(error)}`);
    });
  }

  /** The connection for a statement of the repository's, once the lead went (alone, when it had not). */
  async session(): Promise<PoolConnection> {
    // The repository's statements bypass the watched methods (see `execute`).
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

  /** Settles once the lead sent alone was answered, failed or not. */
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

  /**
   * Why the server rolled the whole transaction back while the work ran: a deadlock in a verb's statement, or in
   * the work's own, found by a savepoint that the rollback took away. The transaction can only run again. A
   * claim's lock timeout under `innodb_rollback_on_timeout` does not set it: its ids were answered in progress.
   */
  get rolledBackBy(): string | undefined {
    return this.#rolledBackBy;
  }

  /** Optimistic: sets none, and rolling back to it works while no statement was sent since. */
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

  /**
   * Sends nothing: the next `SAVEPOINT` of the same name replaces this one, and the transaction's end drops it.
   * That the server did not roll the transaction back meanwhile, {@link TRANSACTION_SAVEPOINT} proves before COMMIT.
   */
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

  /**
   * The server rolled the whole transaction back (a deadlock; a lock wait timeout with
   * `innodb_rollback_on_timeout`): what runs on the session afterwards is a new transaction that must not commit,
   * so later verbs refuse to run and the end is a ROLLBACK.
   */
  abort(reason: string): void {
    this.#abortedBy ??= reason;
    this.doomed = true;
  }

  /** {@link abort}, for a rollback no verb answered for: the transaction is to be run again ({@link rolledBackBy}). */
  lost(reason: string): void {
    this.abort(reason);
    this.#rolledBackBy ??= reason;
  }

  /** Called when `transaction()` ends: a verb still running in this async context may no longer use it. */
  end(): void {
    this.#ended = true;
    this.dispose();
  }

  /** Throws when the transaction cannot take another statement of the repository. */
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
      // The savepoint went with the whole transaction (a statement of the work's was a deadlock victim): a
      // retryable failure of the whole transaction, never of this step alone.
      if (code === ER_SP_DOES_NOT_EXIST || code === ER_LOCK_DEADLOCK) {
        this.lost(
          code === ER_LOCK_DEADLOCK
            ? 'deadlock'
            : 'the savepoint was gone: a deadlock, or a lock wait timeout with innodb_rollback_on_timeout',
        );
        throw new RepositoryError(
          `mysql ${operation}: the server rolled the transaction back (${this.#rolledBackBy}); run it again`,
          { cause: error },
        );
      }
      throw toRepositoryError(`mysql ${operation}`, error);
    }
  }
}
