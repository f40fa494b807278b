import type { IdempotentRepository } from '../store/types.js';
import { BatchEngine, type Runner } from './engine.js';
import { EventTimeDeduplicator } from './event-time.js';
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
  /** The engine, or a behaviour around it (event-time's stream order, the `transaction` option): chosen once. */
  readonly #runner: Runner<M>;

  constructor(options: IdempotentConsumerOptions<M>) {
    this.options = resolveConsumerOptions(options);
    const { eventTime } = this.options;
    if (eventTime) {
      const rule = new EventTimeDeduplicator(this.options, eventTime);
      this.#eventTime = rule;
      const idOf = EventTimeDeduplicator.idReader(this.options, eventTime);
      this.#runner = rule.serialized(new BatchEngine(this.options, this.stats, idOf, rule));
    } else {
      const rule = new ProcessingTimeRule(this.options, this.stats);
      const engine = new BatchEngine(this.options, this.stats, idExtractor(this.options.id), rule);
      this.#runner =
        this.options.transaction === false ? engine : new TransactionRunner(this.options, engine);
    }
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
    return (message) => this.#runner.one(message, handler, NO_OPTIONS);
  }

  /** Processes one message: the batch engine with a batch of one; see {@link wrap}. */
  process<R>(message: M, handler: MessageHandler<M, R>, options?: BatchOptions): Promise<ProcessResult<R>> {
    return this.#runner.one(message, handler, options ?? NO_OPTIONS);
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
    options: BatchOptions = NO_OPTIONS,
  ): Promise<BatchResult<R>> {
    return this.#runner.batch(messages, handler, options);
  }
}
