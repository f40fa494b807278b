import { randomBytes } from 'node:crypto';
import { InProgressError, NoMessageIdError, RepositoryError, toRepositoryError } from '../errors.js';
import type { AddResult, IdempotencyRecord, IdempotentRepository } from '../repositories/types.js';
import { EventTimeDeduplicator } from './event-time.js';
import { idExtractor } from './message-id.js';
import {
  type IdempotentConsumerOptions,
  type ResolvedConsumerOptions,
  resolveConsumerOptions,
} from './options.js';
import { type ConsumerStats, count, emptyStats } from './stats.js';
import type {
  BatchHandler,
  BatchItem,
  BatchOptions,
  BatchResult,
  HandlerContext,
  MessageHandler,
  Outcome,
  ProcessResult,
} from './types.js';

export type { BatchOptions, BatchResult } from './types.js';

const NEW: HandlerContext = Object.freeze({ id: undefined, duplicate: false });

/**
 * Wraps an async handler so each message id is handled once, in the manner of Apache Camel's idempotent consumer.
 *
 * Eager mode claims the id (an in-flight record with a lease) before the handler runs, confirms it after success
 * and releases it after failure. Lazy mode checks, runs, then marks. See the README for the exact guarantees.
 * With the `eventTime` option, event-time deduplication (KIP-655) decides instead; see docs/event-time.md.
 */
export class IdempotentConsumer<M = unknown> {
  readonly options: ResolvedConsumerOptions<M>;
  readonly stats: ConsumerStats = emptyStats();
  readonly #repository: IdempotentRepository;
  readonly #idOf: (message: M) => string | undefined;
  // Owner tokens: one random prefix per consumer and a counter, unique without a syscall per claim.
  readonly #ownerPrefix = randomBytes(6).toString('base64url');
  #ownerSeq = 0;
  readonly #eventTime: EventTimeDeduplicator<M> | undefined;

  constructor(options: IdempotentConsumerOptions<M>) {
    this.options = resolveConsumerOptions(options);
    this.#repository = this.options.repository;
    this.#idOf = idExtractor(this.options.id);
    const { eventTime } = this.options;
    if (eventTime) this.#eventTime = new EventTimeDeduplicator(this.options, eventTime, this.stats);
  }

  /** Event-time mode's stream times and counters; undefined in the default (processing-time TTL) mode. */
  get eventTime(): EventTimeDeduplicator<M> | undefined {
    return this.#eventTime;
  }

  /** The repository this consumer claims ids in. */
  get repository(): IdempotentRepository {
    return this.#repository;
  }

  /**
   * Returns a function with the handler's shape that processes each message once. It resolves to the outcome,
   * rethrows the handler's own error (after releasing the claim), and throws InProgressError, NoMessageIdError or
   * RepositoryError as the policies say.
   */
  wrap<R>(handler: MessageHandler<M, R>): (message: M) => Promise<ProcessResult<R>> {
    return (message) => this.process(message, handler);
  }

  /** Processes one message; see {@link wrap}. */
  async process<R>(message: M, handler: MessageHandler<M, R>): Promise<ProcessResult<R>> {
    if (this.#eventTime) return this.#eventTime.process(message, handler);
    const id = this.#idOf(message);
    if (id === undefined) return this.#withoutId(message, handler);
    return this.options.mode === 'eager'
      ? this.#eager(id, message, handler)
      : this.#lazy(id, message, handler);
  }

  async #eager<R>(id: string, message: M, handler: MessageHandler<M, R>): Promise<ProcessResult<R>> {
    const { ttlMs, leaseMs } = this.options;
    const owner = this.#nextOwner();
    let claim: AddResult;
    try {
      claim = await this.#repository.add(id, { ttlMs, leaseMs, owner });
    } catch (error) {
      return this.#storeDown(error, id, message, handler);
    }
    if (!claim.added) return this.#existing(claim.existing, id, message, handler);

    let result: R;
    try {
      result = await handler(message, { id, duplicate: false });
    } catch (error) {
      this.stats.failed++;
      if (this.options.removeOnFailure) await this.#release(id, owner);
      throw error;
    }
    await this.#confirm(id, owner);
    this.stats.processed++;
    return { outcome: 'processed', id, result };
  }

  async #lazy<R>(id: string, message: M, handler: MessageHandler<M, R>): Promise<ProcessResult<R>> {
    let existing: IdempotencyRecord | undefined;
    try {
      existing = await this.#repository.get(id);
    } catch (error) {
      return this.#storeDown(error, id, message, handler);
    }
    if (existing) return this.#existing(existing, id, message, handler);
    let result: R;
    try {
      result = await handler(message, { id, duplicate: false });
    } catch (error) {
      this.stats.failed++;
      throw error;
    }
    await this.#storeCall('mark', () => this.#repository.add(id, { ttlMs: this.options.ttlMs }));
    this.stats.processed++;
    return { outcome: 'processed', id, result };
  }

  async #withoutId<R>(message: M, handler: MessageHandler<M, R>): Promise<ProcessResult<R>> {
    if (this.options.nullId === 'reject') {
      this.stats.failed++;
      throw new NoMessageIdError();
    }
    this.stats.noId++;
    const result = await handler(message, NEW);
    return { outcome: 'no-id', id: undefined, result };
  }

  /** A live record holds the id: in-progress or duplicate, by state and policy. */
  async #existing<R>(
    existing: IdempotencyRecord,
    id: string,
    message: M,
    handler: MessageHandler<M, R>,
  ): Promise<ProcessResult<R>> {
    if (existing.state === 'in-flight' && this.options.inProgress === 'error') {
      this.stats.inProgress++;
      throw new InProgressError(id, existing.leaseExpiresAt);
    }
    this.stats.duplicate++;
    const context: HandlerContext = { id, duplicate: true, existing };
    await this.options.onDuplicate?.(message, context);
    if (this.options.skipDuplicate) return { outcome: 'duplicate', id, existing };
    const result = await handler(message, context);
    return { outcome: 'duplicate', id, existing, result };
  }

  /** The store failed before the handler: raise (`fail`) or handle as new (`process`). */
  async #storeDown<R>(
    error: unknown,
    id: string,
    message: M,
    handler: MessageHandler<M, R>,
  ): Promise<ProcessResult<R>> {
    const failure = toRepositoryError('claim', error);
    if (!(failure instanceof RepositoryError) || this.options.storeFailure === 'fail') throw failure;
    this.stats.failOpen++;
    let result: R;
    try {
      result = await handler(message, { id, duplicate: false });
    } catch (handlerError) {
      this.stats.failed++;
      throw handlerError;
    }
    this.stats.processed++;
    return { outcome: 'processed', id, result, failOpen: true };
  }

  async #confirm(id: string, owner: string): Promise<void> {
    await this.#storeCall('confirm', () =>
      this.#repository.confirm({ id, owner }, { ttlMs: this.options.ttlMs }),
    );
  }

  /**
   * A store call after the handler already ran. Under `fail` its error is raised, so the caller does not
   * acknowledge the message; under `process` it is counted and the (already handled) message stands.
   */
  async #storeCall(operation: string, call: () => Promise<unknown>): Promise<void> {
    try {
      await call();
    } catch (error) {
      const failure = toRepositoryError(operation, error);
      if (this.options.storeFailure === 'fail' || !(failure instanceof RepositoryError)) throw failure;
      this.stats.failOpen++;
    }
  }

  /** Releases a claim after a failed handler; if the store refuses, the claim lapses with its lease. */
  async #release(id: string, owner: string): Promise<void> {
    try {
      await this.#repository.remove(id, owner);
    } catch {
      this.stats.releaseFailures++;
    }
  }

  #nextOwner(): string {
    return `${this.#ownerPrefix}.${(this.#ownerSeq++).toString(36)}`;
  }

  /**
   * Processes a batch with one multi-key store call. Duplicates inside the batch are resolved first (the first
   * message by position wins), then `addMany` (eager) or `containsMany` (lazy) covers the rest. The handler runs
   * per message in order, or once with every message that needs handling (`{ batch }`). A failed message
   * releases only its own claim. Store failure under `fail` rejects the whole batch, before any handler runs.
   */
  async processBatch<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions = {},
  ): Promise<BatchResult<R>> {
    if (this.#eventTime) return this.#eventTime.processBatch(messages, handler, options);
    const n = messages.length;
    const results = new Array<ProcessResult<R>>(n);
    const ids = new Array<string | undefined>(n);
    // Positions whose id is stored (first occurrences); later occurrences point at their first.
    const firstOf = new Map<string, number>();
    const unique: number[] = [];
    for (let i = 0; i < n; i++) {
      let id: string | undefined;
      try {
        id = this.#idOf(messages[i] as M);
      } catch (error) {
        results[i] = { outcome: 'failed', id: undefined, error };
        continue;
      }
      ids[i] = id;
      if (id === undefined) continue;
      if (!firstOf.has(id)) {
        firstOf.set(id, i);
        unique.push(i);
      }
    }

    const owner = this.#nextOwner();
    const verdicts = await this.#classify(unique, ids, owner);

    // Decide each message's fate before running anything, so counts and hooks follow input order.
    const toRun: BatchItem<M>[] = [];
    for (let i = 0; i < n; i++) {
      if (results[i]) continue;
      const id = ids[i];
      const message = messages[i] as M;
      if (id === undefined) {
        if (this.options.nullId === 'reject') {
          results[i] = { outcome: 'failed', id, error: new NoMessageIdError() };
        } else {
          toRun.push({ message, context: NEW, index: i });
        }
        continue;
      }
      const first = firstOf.get(id) as number;
      const verdict = verdicts.get(first);
      if (first === i && verdict?.added !== false) {
        toRun.push({ message, context: { id, duplicate: false }, index: i });
        continue;
      }
      // A repeat of an earlier message in this batch is a duplicate of it, whatever the store said.
      const existing = verdict && !verdict.added ? verdict.existing : undefined;
      if (first === i && existing?.state === 'in-flight' && this.options.inProgress === 'error') {
        results[i] = { outcome: 'in-progress', id, existing };
        continue;
      }
      const context: HandlerContext = { id, duplicate: true, existing };
      await this.options.onDuplicate?.(message, context);
      if (this.options.skipDuplicate) results[i] = { outcome: 'duplicate', id, existing };
      else toRun.push({ message, context, index: i });
    }

    await this.#runHandlers(toRun, handler, results, verdicts.failOpen);
    await this.#settleClaims(unique, ids, owner, results);
    for (const r of results) count(this.stats, r.outcome);
    if (verdicts.failOpen) this.stats.failOpen += unique.length;
    return { results };
  }

  /** One store call for the batch's unique ids. */
  async #classify(
    unique: readonly number[],
    ids: readonly (string | undefined)[],
    owner: string,
  ): Promise<Map<number, AddResult> & { failOpen?: boolean }> {
    const verdicts: Map<number, AddResult> & { failOpen?: boolean } = new Map();
    if (unique.length === 0) return verdicts;
    const { ttlMs, leaseMs } = this.options;
    try {
      if (this.options.mode === 'eager') {
        const added = await this.#repository.addMany(
          unique.map((i) => ({ id: ids[i] as string })),
          { ttlMs, leaseMs, owner },
        );
        unique.forEach((pos, k) => {
          verdicts.set(pos, added[k] as AddResult);
        });
      } else {
        const seen = await this.#repository.containsMany(unique.map((i) => ids[i] as string));
        const now = Date.now();
        unique.forEach((pos, k) => {
          if (seen[k]) {
            verdicts.set(pos, {
              added: false,
              existing: { id: ids[pos] as string, state: 'confirmed', expiresAt: now + ttlMs },
            });
          }
        });
      }
    } catch (error) {
      const failure = toRepositoryError('claim batch', error);
      if (this.options.storeFailure === 'fail' || !(failure instanceof RepositoryError)) throw failure;
      verdicts.failOpen = true;
      verdicts.clear();
    }
    return verdicts;
  }

  async #runHandlers<R>(
    items: readonly BatchItem<M>[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    results: ProcessResult<R>[],
    failOpen = false,
  ): Promise<void> {
    const outcomeOf = (item: BatchItem<M>): Outcome =>
      item.context.id === undefined ? 'no-id' : item.context.duplicate ? 'duplicate' : 'processed';
    if (typeof handler === 'function') {
      for (const item of items) {
        try {
          const result = await handler(item.message, item.context);
          results[item.index] = {
            outcome: outcomeOf(item),
            id: item.context.id,
            result,
            ...extra(item, failOpen),
          };
        } catch (error) {
          results[item.index] = { outcome: 'failed', id: item.context.id, error };
        }
      }
      return;
    }
    if (items.length === 0) return;
    try {
      await handler.batch(items);
      for (const item of items) {
        results[item.index] = { outcome: outcomeOf(item), id: item.context.id, ...extra(item, failOpen) };
      }
    } catch (error) {
      for (const item of items) results[item.index] = { outcome: 'failed', id: item.context.id, error };
    }
  }

  /** Confirms the claims whose handler succeeded (one call) and releases those that failed. */
  async #settleClaims(
    unique: readonly number[],
    ids: readonly (string | undefined)[],
    owner: string,
    results: readonly ProcessResult[],
  ): Promise<void> {
    const succeeded: string[] = [];
    const failed: string[] = [];
    for (const i of unique) {
      const r = results[i];
      if (r?.failOpen) continue;
      if (r?.outcome === 'processed') succeeded.push(ids[i] as string);
      else if (r?.outcome === 'failed') failed.push(ids[i] as string);
    }
    const { ttlMs } = this.options;
    if (this.options.mode === 'lazy') {
      if (succeeded.length > 0) {
        await this.#storeCall('mark batch', () =>
          this.#repository.addMany(
            succeeded.map((id) => ({ id })),
            { ttlMs },
          ),
        );
      }
      return;
    }
    if (this.options.removeOnFailure) await Promise.all(failed.map((id) => this.#release(id, owner)));
    if (succeeded.length > 0) {
      await this.#storeCall('confirm batch', () =>
        this.#repository.confirmMany(
          succeeded.map((id) => ({ id, owner })),
          { ttlMs },
        ),
      );
    }
  }
}

function extra(
  item: BatchItem<unknown>,
  failOpen: boolean,
): { existing?: IdempotencyRecord; failOpen?: boolean } {
  if (item.context.duplicate) return { existing: item.context.existing };
  return failOpen && item.context.id !== undefined ? { failOpen: true } : {};
}
