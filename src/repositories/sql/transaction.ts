import { RepositoryError } from '../../errors.js';
import type { RepositoryTransaction } from '../../store/types.js';

/** The savepoint `RepositoryTransaction.savepoint()` opens: one at a time, so one fixed name. */
export const SAVEPOINT = 'idempotent_consumer';

/** Runs a statement that ends a transaction or resets its session: the error (the connection is then destroyed). */
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

/** One open transaction: its connection, lock timeout, lead (sent with its first statement) and savepoint. */
export abstract class SqlTransaction<C> implements RepositoryTransaction<C> {
  readonly connection: C;
  readonly lockTimeoutMs: number;
  needsSavepoints = false;
  /** Made rollback-only (`rollbackOnly()`, a claim answered in progress). */
  protected doomed = false;
  readonly #store: string;
  /** Undefined once sent: a transaction whose lead never went has nothing to end. */
  #lead: readonly string[] | undefined;
  /** `skipped`: asked for while the dialect could set none (nothing to roll back to). */
  #savepoint: 'none' | 'open' | 'skipped' = 'none';
  /** The open savepoint is optimistic (none set): {@link #sent} when it was asked for. */
  #markedAt: number | undefined;
  /** Statements sent through the watched methods since the first optimistic savepoint. */
  #sent = 0;
  /** The watched methods (see {@link mark}), each with the own property it covers (undefined: the prototype's). */
  #watched: Map<string, unknown> | undefined;

  constructor(store: string, client: C, lockTimeoutMs: number, lead: readonly string[]) {
    this.#store = store;
    this.connection = client;
    this.lockTimeoutMs = lockTimeoutMs;
    this.#lead = lead;
  }

  /** For the caller's own statements: the lead goes first. */
  get client(): C {
    this.handOut();
    return this.connection;
  }

  get started(): boolean {
    return this.#lead === undefined;
  }

  /** The lead, for a statement that sends it ahead of its own in one round trip; undefined once it went. */
  takeLead(): readonly string[] | undefined {
    const lead = this.#lead;
    this.#lead = undefined;
    return lead;
  }

  /** Sends the lead alone, if it has not gone. */
  protected abstract handOut(): void;

  get rollingBack(): boolean {
    return this.doomed;
  }

  rollbackOnly(): void {
    this.doomed = true;
  }

  protected rollback(): Promise<Error | undefined> {
    return this.started
      ? endQuietly(this.connection as { query(sql: string): Promise<unknown> }, 'ROLLBACK')
      : Promise.resolve(undefined);
  }

  /** The work failed: rolls back what was sent (never throws). */
  abstract abandon(): Promise<void>;
  /** The work succeeded: commits, or rolls back a rollback-only transaction. */
  abstract finish(fail: (operation: string, error: unknown) => unknown): Promise<void>;
  /** Gives the connection back to the pool, or destroys it when its state is unknown. */
  abstract close(): Promise<void>;

  abstract savepoint(options?: { readonly optimistic?: boolean }): Promise<void>;
  abstract releaseSavepoint(): Promise<void>;
  abstract rollbackToSavepoint(): Promise<void>;

  /** Refused while one is open. */
  protected async openSavepoint(set: () => Promise<'open' | 'skipped'>): Promise<void> {
    if (this.#savepoint !== 'none') {
      throw new RepositoryError(
        `${this.#store} savepoint: one is already open (release or roll back to it first)`,
        { retryable: false },
      );
    }
    this.#savepoint = await set();
  }

  /** Opens an optimistic savepoint: none is set, the statements sent through `methods` are counted from here. */
  protected mark(methods: readonly string[]): 'open' {
    if (this.#watched === undefined) {
      const client = this.connection as Record<string, unknown>;
      this.#watched = new Map();
      for (const name of methods) {
        const method = client[name] as (...args: unknown[]) => unknown;
        this.#watched.set(name, Object.hasOwn(client, name) ? method : undefined);
        client[name] = (...args: unknown[]) => {
          this.#sent++;
          return method.apply(client, args);
        };
      }
    }
    this.#markedAt = this.#sent;
    return 'open';
  }

  /** Counts a statement of the repository's that bypasses the watched methods. */
  protected counted(): void {
    if (this.#watched !== undefined) this.#sent++;
  }

  /** Ends an optimistic savepoint: whether anything was sent since (undefined: a real one). */
  protected takeMark(): { readonly touched: boolean } | undefined {
    const markedAt = this.#markedAt;
    if (markedAt === undefined) return undefined;
    this.#markedAt = undefined;
    return { touched: this.#sent !== markedAt };
  }

  /** An optimistic savepoint could not stand in for a real one: roll back, and run again with real ones. */
  protected needSavepoints(): void {
    this.needsSavepoints = true;
    this.rollbackOnly();
  }

  /** Takes the open savepoint: answers how it was set. */
  protected takeSavepoint(operation: string): 'open' | 'skipped' {
    const state = this.#savepoint;
    if (state === 'none') {
      throw new RepositoryError(`${this.#store} ${operation}: no savepoint is open`, { retryable: false });
    }
    this.#savepoint = 'none';
    return state;
  }

  /** Gives the connection its own methods back, before it returns to the pool. */
  dispose(): void {
    const client = this.connection as Record<string, unknown>;
    for (const [name, own] of this.#watched ?? []) {
      if (own === undefined) delete client[name];
      else client[name] = own;
    }
    this.#watched = undefined;
  }
}
