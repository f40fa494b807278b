import type { IdempotentRepository, TransactionalRepository } from './types.js';

/** True when the repository can run its verbs inside the side effect's transaction. */
export function isTransactional(repository: IdempotentRepository): repository is TransactionalRepository {
  return typeof (repository as Partial<TransactionalRepository>).transaction === 'function';
}
