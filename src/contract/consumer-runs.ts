import { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import type { IdempotentConsumerOptions } from '../consumer/options.js';
import { isTransactional } from '../store/transaction.js';
import type { IdempotentRepository } from '../store/types.js';
import { LONG_TTL_MS } from './context.js';

/** One way the consumer drives a store: its mode and, on a transactional store, where the mark commits. */
export interface ConsumerRun {
  readonly label: string;
  readonly options: Pick<IdempotentConsumerOptions<unknown>, 'mode' | 'transaction'>;
}

/**
 * The consumer set-ups a promise about the consumer over a store must hold in, so that each write path of the
 * store is crossed: eager and lazy mode (by default a transaction per message on a transactional store), and on a
 * transactional store also a transaction per batch and none.
 */
export function consumerRuns(repository: IdempotentRepository): ConsumerRun[] {
  const transactional = isTransactional(repository);
  const runs: ConsumerRun[] = [
    { label: transactional ? 'eager, a transaction per message' : 'eager', options: { mode: 'eager' } },
    { label: transactional ? 'lazy, a transaction per message' : 'lazy', options: { mode: 'lazy' } },
  ];
  if (transactional) {
    runs.push(
      { label: 'eager, a transaction per batch', options: { mode: 'eager', transaction: 'batch' } },
      { label: 'eager, no transaction', options: { mode: 'eager', transaction: false } },
    );
  }
  return runs;
}

/** A consumer of `{ id }` messages in one of the {@link consumerRuns}, keeping results and fingerprints. */
export function storingConsumer<M>(
  repository: IdempotentRepository,
  run: ConsumerRun,
): IdempotentConsumer<M> {
  return new IdempotentConsumer<M>({
    repository,
    id: 'id',
    ttlMs: LONG_TTL_MS,
    leaseMs: LONG_TTL_MS,
    storeResult: true,
    fingerprint: true,
    onWarning: () => {},
    ...run.options,
  } as IdempotentConsumerOptions<M>);
}
