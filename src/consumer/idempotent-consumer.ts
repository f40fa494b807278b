import type { IdempotentRepository } from '../store/types.js';
import { BatchEngine, type Runner } from './engine.js';
import { EventTimeDeduplicator } from './event-time.js';
import {
  type IdempotentConsumerOptions,
  type ResolvedConsumerOptions,
  resolveConsumerOptions,
} from './options.js';
import { ProcessingTimeRule } from './processing-time.js';
import { type ConsumerStats, emptyStats } from './stats.js';
import { TransactionRunner } from './transaction.js';
import type { BatchHandler, BatchOptions, BatchResult, MessageHandler, ProcessResult } from './types.js';

const NO_OPTIONS: BatchOptions = Object.freeze({});

/**
 * Wraps a handler so each message id is handled once, as Apache Camel's idempotent consumer: eager mode claims
 * the id before the handler and confirms or releases it after; lazy mode checks, runs, then marks; `eventTime`
 * deduplicates by event time (KIP-655). Every call runs through the one batch engine (docs/engine.md).
 */
export class IdempotentConsumer<M = unknown> {
  readonly options: ResolvedConsumerOptions<M>;
  readonly stats: ConsumerStats = emptyStats();
  /** Event-time mode's stream times and counters; undefined in the default (processing-time TTL) mode. */
  readonly eventTime: EventTimeDeduplicator<M> | undefined;
  /** The engine, or a behaviour around it (event-time's stream order, the `transaction` option). */
  readonly #runner: Runner<M>;

  constructor(options: IdempotentConsumerOptions<M>) {
    this.options = resolveConsumerOptions(options);
    const { options: resolved, stats } = this;
    if (resolved.eventTime) {
      const rule = new EventTimeDeduplicator(resolved, resolved.eventTime);
      this.eventTime = rule;
      this.#runner = rule.serialized(new BatchEngine(resolved, stats, rule));
    } else {
      const engine = new BatchEngine(resolved, stats, new ProcessingTimeRule(resolved, stats));
      this.#runner = resolved.transaction === false ? engine : new TransactionRunner(resolved, engine);
    }
  }

  /** The repository this consumer claims ids in. */
  get repository(): IdempotentRepository {
    return this.options.repository;
  }

  /**
   * The handler, processing each message once: resolves to the outcome, or rejects with the handler's error, a
   * replayed StoredFailureError, or what the policies raise (InProgressError, NoMessageIdError, ...).
   */
  wrap<R>(handler: MessageHandler<M, R>): (message: M) => Promise<ProcessResult<R>> {
    return (message) => this.#runner.one(message, handler, NO_OPTIONS);
  }

  /** Processes one message: the batch engine with a batch of one; see {@link wrap}. */
  process<R>(message: M, handler: MessageHandler<M, R>, options?: BatchOptions): Promise<ProcessResult<R>> {
    return this.#runner.one(message, handler, options ?? NO_OPTIONS);
  }

  /**
   * Processes a batch with one multi-key store call (the first message of an id wins), the handler per message
   * in order or once (`{ batch }`). A store failure under `storeFailure: 'fail'` rejects the whole batch.
   */
  processBatch<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions = NO_OPTIONS,
  ): Promise<BatchResult<R>> {
    return this.#runner.batch(messages, handler, options);
  }
}
