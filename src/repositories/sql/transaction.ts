import { RepositoryError } from '../../errors.js';
import type { RepositoryTransaction } from '../../store/types.js';

/** The savepoint `RepositoryTransaction.savepoint()` opens: one at a time, so one fixed name. */
export const SAVEPOINT = 'idempotent_consumer';

/**
 * Runs a statement that ends a transaction or resets its session (ROLLBACK, `SET autocommit`): the error when it
 * failed, and the connection's state is then unknown (it is destroyed, never given back to the pool).
 */
export async function endQuietly(
  client: { query(sql: string): Promise<unknown> },
  sql: string,
): Promise<Error | undefined> {
  try {
    await client.query(sql);
    return undefined;
  } catch (error) {
    return error instanceof Error ? error : new Error(String(error));
  }
}

/**
 * A driver connection's statement methods (`query`, `execute`), watched for one transaction: what is sent through
 * them is counted (an optimistic savepoint asks whether anything was sent since it), and `ahead` runs before each
 * (PostgreSQL sends a held-back SAVEPOINT there) and may answer what to do once the method returned. Own
 * properties over the prototype's methods, for this transaction only: {@link dispose} removes them.
 */
export class StatementWatch {
  /** Statements sent through the watched methods so far. */
  sent = 0;
  readonly #client: Record<string, unknown>;
  /** The connection's own properties the watch covers (another library's), given back by dispose. */
  readonly #own = new Map<string, unknown>();
  readonly #methods: readonly string[];
  /** The methods as they were, by name. */
  readonly #originals = new Map<string, (...args: unknown[]) => unknown>();

  constructor(
    client: object,
    methods: readonly string[],
    ahead?: (args: unknown[]) => (() => void) | undefined,
  ) {
    const target = client as Record<string, unknown>;
    this.#client = target;
    this.#methods = methods;
    for (const name of methods) {
      const method = target[name] as (...args: unknown[]) => unknown;
      if (Object.hasOwn(target, name)) this.#own.set(name, method);
      this.#originals.set(name, method);
      target[name] = (...args: unknown[]) => {
        this.sent++;
        const after = ahead?.(args);
        try {
          return method.apply(client, args);
        } finally {
          after?.();
        }
      };
    }
  }

  /** Calls method `name` as it was, neither counted nor preceded by `ahead`. */
  unwatched(name: string, ...args: unknown[]): unknown {
    return (this.#originals.get(name) as (...args: unknown[]) => unknown).apply(this.#client, args);
  }

  /** Gives the connection its methods back: before it returns to the pool. */
  dispose(): void {
    for (const name of this.#methods) {
      if (this.#own.has(name)) this.#client[name] = this.#own.get(name);
      else delete this.#client[name];
    }
  }
}

/**
 * One open transaction of a SQL store: the pooled connection it runs on, its lock timeout, and the one savepoint
 * the consumer may hold at a time. How the transaction begins, ends and learns it broke is its dialect's.
 */
export abstract class SqlTransaction<C> implements RepositoryTransaction<C> {
  /** The pooled connection, for the dialect's own statements (see {@link client}). */
  protected readonly connection: C;
  /** The lock timeout of this transaction, in ms, as asked for. */
  readonly lockTimeoutMs: number;
  readonly #store: string;
  /** `open`: SAVEPOINT ran. `skipped`: asked for while the dialect could set none (nothing to roll back to). */
  #savepoint: 'none' | 'open' | 'skipped' = 'none';
  /** The open savepoint is optimistic (none set): {@link statementsSent} when it was asked for. */
  #markedAt: number | undefined;
  needsSavepoints = false;

  constructor(store: string, client: C, lockTimeoutMs: number) {
    this.#store = store;
    this.connection = client;
    this.lockTimeoutMs = lockTimeoutMs;
  }

  /**
   * The driver's connection inside the transaction, for the caller's own statements: the transaction has begun
   * on it by the time the caller's first statement runs (see {@link handOut}).
   */
  get client(): C {
    this.handOut();
    return this.connection;
  }

  /**
   * Called whenever the connection is handed out: a dialect that sends its BEGIN with its first statement
   * (PostgreSQL) sends it now if none went yet, ahead of whatever the caller sends.
   */
  protected handOut(): void {}

  abstract get rollingBack(): boolean;
  abstract rollbackOnly(): void;
  abstract savepoint(options?: { readonly optimistic?: boolean }): Promise<void>;
  abstract releaseSavepoint(): Promise<void>;
  abstract rollbackToSavepoint(): Promise<void>;

  /** Sets the savepoint through `set`, which answers whether it ran; refused while one is open. */
  protected async openSavepoint(set: () => Promise<'open' | 'skipped'>): Promise<void> {
    if (this.#savepoint !== 'none') {
      throw new RepositoryError(
        `${this.#store} savepoint: one is already open (release or roll back to it first)`,
        { retryable: false },
      );
    }
    this.#savepoint = await set();
  }

  /** Statements sent on the connection so far (the dialect counts them), for optimistic savepoints. */
  protected abstract statementsSent(): number;

  /** Opens an optimistic savepoint: none is set, the count of statements sent so far is noted. */
  protected mark(): 'open' {
    this.#markedAt = this.statementsSent();
    return 'open';
  }

  /**
   * Ends the open savepoint if it is optimistic: whether a statement was sent since it (`touched`), or undefined
   * when the open savepoint is a real one.
   */
  protected takeMark(): { readonly touched: boolean } | undefined {
    const markedAt = this.#markedAt;
    if (markedAt === undefined) return undefined;
    this.#markedAt = undefined;
    return { touched: this.statementsSent() !== markedAt };
  }

  /** An optimistic savepoint could not stand in for a real one: roll back, and run again with real ones. */
  protected needSavepoints(): void {
    this.needsSavepoints = true;
    this.rollbackOnly();
  }

  /** Takes the open savepoint for `operation` (release or roll back): answers how it was set. */
  protected takeSavepoint(operation: string): 'open' | 'skipped' {
    const state = this.#savepoint;
    if (state === 'none') {
      throw new RepositoryError(`${this.#store} ${operation}: no savepoint is open`, { retryable: false });
    }
    this.#savepoint = 'none';
    return state;
  }
}
