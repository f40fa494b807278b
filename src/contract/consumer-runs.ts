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
 * The consumer set-ups a promise about the consumer over a store must hold in: eager and lazy mode (each with the
 * consumer's default, which on a transactional store is one transaction per message), and on a transactional
 * store (`repository.transaction`) also one transaction per batch and none. Each write path of the store
 * (confirm, mark, their batch forms, inside and outside a transaction) is then crossed.
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

/**
 * A consumer of messages with an `id` field over `repository` in one of its {@link consumerRuns}, keeping results
 * and fingerprints, with leases and retention long enough that nothing lapses during a test.
 */
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
