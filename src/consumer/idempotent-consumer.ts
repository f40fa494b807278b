import { InProgressError } from '../errors.js';
import type { IdempotentRepository } from '../store/types.js';
import { BatchEngine } from './engine.js';
import { DEFAULT_STREAM, EventTimeDeduplicator } from './event-time.js';
import { idExtractor } from './message-id.js';
import {
  type IdempotentConsumerOptions,
  type ResolvedConsumerOptions,
  resolveConsumerOptions,
} from './options.js';
import { ProcessingTimeRule } from './processing-time.js';
import { type ConsumerStats, emptyStats } from './stats.js';
import { TransactionRunner } from './transaction.js';
import type { BatchHandler, BatchOptions, BatchResult, MessageHandler, ProcessResult } from './types.js';

export type { BatchOptions, BatchResult } from './types.js';

const NO_OPTIONS: BatchOptions = Object.freeze({});

/**
 * Wraps an async handler so each message id is handled once, in the manner of Apache Camel's idempotent consumer.
 *
 * Eager mode claims the id (an in-flight record with a lease) before the handler runs, confirms it after success
 * and releases it after failure. Lazy mode checks, runs, then marks. See the README for the exact guarantees.
 * With the `eventTime` option, event-time deduplication (KIP-655) decides instead; see docs/event-time.md.
 * Every path (`wrap`, `process`, `processBatch`) runs through the same batch engine (`./engine.ts`).
 */
export class IdempotentConsumer<M = unknown> {
  readonly options: ResolvedConsumerOptions<M>;
  readonly stats: ConsumerStats = emptyStats();
  readonly #eventTime: EventTimeDeduplicator<M> | undefined;
  // biome-ignore lint/suspicious/noExplicitAny: the rule's per-batch state type is private to each rule.
  readonly #engine: BatchEngine<M, any>;
  /** Set when the mark commits in the side effect's transaction (the `transaction` option). */
  readonly #transactions: TransactionRunner<M> | undefined;

  constructor(options: IdempotentConsumerOptions<M>) {
    this.options = resolveConsumerOptions(options);
    const { eventTime } = this.options;
    if (eventTime) {
      const rule = new EventTimeDeduplicator(this.options, eventTime);
      this.#eventTime = rule;
      const idOf = EventTimeDeduplicator.idReader(this.options, eventTime);
      this.#engine = new BatchEngine(this.options, this.stats, idOf, rule);
    } else {
      const rule = new ProcessingTimeRule(this.options, this.stats);
      this.#engine = new BatchEngine(this.options, this.stats, idExtractor(this.options.id), rule);
    }
    this.#transactions =
      this.options.transaction === false ? undefined : new TransactionRunner(this.options, this.#engine);
  }

  /** Event-time mode's stream times and counters; undefined in the default (processing-time TTL) mode. */
  get eventTime(): EventTimeDeduplicator<M> | undefined {
    return this.#eventTime;
  }

  /** The repository this consumer claims ids in. */
  get repository(): IdempotentRepository {
    return this.options.repository;
  }

  /**
   * Returns a function with the handler's shape that processes each message once. It resolves to the outcome,
   * rethrows the handler's own error (after releasing the claim), rethrows a replayed failure as a
   * StoredFailureError, and throws InProgressError, IdempotencyConflictError, NoMessageIdError or
   * RepositoryError as the policies say.
   */
  wrap<R>(handler: MessageHandler<M, R>): (message: M) => Promise<ProcessResult<R>> {
    return (message) => this.process(message, handler);
  }

  /** Processes one message: the batch engine with a batch of one; see {@link wrap}. */
  process<R>(message: M, handler: MessageHandler<M, R>, options?: BatchOptions): Promise<ProcessResult<R>> {
    const answer = answerOne as (
      results: ProcessResult<R>[],
      options: ResolvedConsumerOptions<M>,
    ) => ProcessResult<R>;
    if (this.#eventTime) {
      return this.processBatch([message], handler, options).then((batch) =>
        answer(batch.results, this.options),
      );
    }
    if (this.#transactions) {
      return this.#transactions
        .one(message, handler, options ?? NO_OPTIONS)
        .then((results) => answer(results, this.options));
    }
    return this.#engine.executeOne(message, handler, options ?? NO_OPTIONS, DEFAULT_STREAM, answer);
  }

  /**
   * Processes a batch with one multi-key store call. Duplicates inside the batch are resolved first (the first
   * message by position wins), then one store call covers the rest: `addMany` (eager), `getMany` (lazy and
   * event-time). The handler runs per message in order, or once with every message that needs handling
   * (`{ batch }`, which may answer the items that failed). A failed message releases only its own claim. Store
   * failure under `fail` rejects the whole batch, before any handler runs when it is the read that failed.
   */
  processBatch<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions = {},
  ): Promise<BatchResult<R>> {
    if (this.#transactions) {
      return this.#transactions.batch(messages, handler, options).then((results) => ({ results }));
    }
    const stream = options.stream ?? DEFAULT_STREAM;
    if (this.#eventTime) {
      return this.#eventTime.serialize(stream, () => this.#engine.run(messages, handler, options, stream));
    }
    return this.#engine.run(messages, handler, options, stream);
  }
}

/**
 * A batch of one's result as `process` answers it: an outcome, or the error the policies raise. One function
 * for every consumer, not a closure each: the engine's call to it then always calls the same function.
 */
function answerOne(results: ProcessResult[], options: ResolvedConsumerOptions<unknown>): ProcessResult {
  const result = results[0] as ProcessResult;
  if (result.outcome === 'failed') throw result.error;
  if (result.outcome === 'conflict' && options.onConflict === 'error') throw result.error;
  if (result.outcome === 'in-progress') {
    throw new InProgressError(result.id as string, result.existing?.leaseExpiresAt);
  }
  return result;
}
