import { AsyncLocalStorage } from 'node:async_hooks';
import type { IdempotentRepository, TransactionalRepository } from './types.js';

/** True when the repository can run its verbs inside the side effect's transaction. */
export function isTransactional(repository: IdempotentRepository): repository is TransactionalRepository {
  return typeof (repository as Partial<TransactionalRepository>).transaction === 'function';
}

/**
 * The open transaction of a SQL store, per async context: a store's verbs ask `current()` for the connection
 * to run on (the transaction's, else none: use the pool). One per repository instance, so two repositories
 * never see each other's transactions.
 */
export class TransactionScope<T> {
  readonly #storage = new AsyncLocalStorage<T>();

  /** The transaction open in this async context, if any. */
  current(): T | undefined {
    return this.#storage.getStore();
  }

  /** Runs `work` with `transaction` as the current one for everything it calls and awaits. */
  run<R>(transaction: T, work: () => R): R {
    return this.#storage.run(transaction, work);
  }
}
