import {
  IdempotencyConflictError,
  InProgressError,
  NoMessageIdError,
  RepositoryError,
  toRepositoryError,
} from '../errors.js';
import { OutcomeCipher } from './encryption.js';
import { fingerprinter, fingerprintMatches } from './fingerprint.js';
import { LeaseRenewer, processWarning, type Renewable, type WarningSink } from './lease-renewal.js';
import type { ResolvedConsumerOptions } from './options.js';
import {
  type Batch,
  DEFAULT_STREAM,
  type DedupRule,
  isThenable,
  type RuleTraits,
  type StoreGuard,
} from './rule.js';
import { type ConsumerStats, count } from './stats.js';
import { OutcomeCodec } from './stored-outcome.js';
import { BatchTelemetry, type ConsumerTelemetry, consumerTelemetry } from './telemetry/telemetry.js';
import type {
  BatchHandler,
  BatchItem,
  BatchOptions,
  BatchResult,
  DuplicateRecord,
  HandlerContext,
  MessageHandler,
  ProcessResult,
  StoreCall,
} from './types.js';

const NO_ID: HandlerContext = Object.freeze({ id: undefined, duplicate: false });

/** How many finished working states of `one` a consumer keeps for later calls (see `#spares`). */
const MAX_SPARES = 64;

/** How the consumer runs `process` and `processBatch`: the engine, or a behaviour around it, chosen once. */
export interface Runner<M> {
  one<R>(message: M, handler: MessageHandler<M, R>, options: BatchOptions): Promise<ProcessResult<R>>;
  batch<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions,
  ): Promise<BatchResult<R>>;
}

/** Answers a finished batch: its BatchResult (`batch`), its one result (`one`), ... */
export type Finish<M, R, T> = (results: ProcessResult<R>[], options: ResolvedConsumerOptions<M>) => T;

/**
 * The one batch engine behind every path (docs/engine.md): ids → first-wins → one store call → decisions →
 * handlers → settle → counters. A claim is always confirmed or released, whatever a hook or a handler throws.
 */
export class BatchEngine<M, S> implements Runner<M> {
  readonly #options: ResolvedConsumerOptions<M>;
  readonly #stats: ConsumerStats;
  readonly #rule: DedupRule<M, S>;
  readonly #traits: RuleTraits<M>;
  readonly #fingerprint: ((message: M) => string) | undefined;
  readonly #codec: OutcomeCodec;
  readonly #keepValues: boolean;
  /** `removeOnFailure: false` where the rule keeps failures: handler failures are kept with the id. */
  readonly #keepFailures: boolean;
  /** Renews the claims of running batches (eager only). */
  readonly #renewer: LeaseRenewer<Run<M, S>> | undefined;
  readonly #warn: WarningSink;
  /** Spans, metrics and `onOutcome`; undefined without `telemetry` and `onOutcome`. */
  readonly #telemetry: ConsumerTelemetry | undefined;
  #warnedNoId = false;

  constructor(options: ResolvedConsumerOptions<M>, stats: ConsumerStats, rule: DedupRule<M, S>) {
    this.#options = options;
    this.#stats = stats;
    this.#rule = rule;
    const { traits } = rule;
    this.#traits = traits;
    this.#fingerprint = options.fingerprint === undefined ? undefined : fingerprinter(options.fingerprint);
    // A repository written before results existed declares no cap: 64 KiB is safe for any store we know.
    const maxBytes = options.repository.capabilities?.maxResultBytes ?? 65_536;
    const cipher =
      options.encryption === undefined
        ? undefined
        : new OutcomeCipher(options.encryption, 'new IdempotentConsumer(...)');
    this.#codec = new OutcomeCodec(options.storeResult, maxBytes, options.failureMessage, cipher);
    this.#keepValues = this.#codec.keepsValues;
    this.#keepFailures = !options.removeOnFailure && traits.keepsFailures;
    this.#warn = options.onWarning ?? processWarning;
    this.#telemetry =
      options.telemetry === undefined && options.onOutcome === undefined
        ? undefined
        : consumerTelemetry(options, traits.mode, this.#warn);
    const held = rule.held?.bind(rule);
    // In a transaction a claim is an uncommitted row nobody else sees: its lease cannot lapse.
    this.#renewer =
      held === undefined || options.mode !== 'eager' || options.transaction !== false
        ? undefined
        : new LeaseRenewer<Run<M, S>>(
            options.repository,
            options.leaseMs,
            stats,
            (run) => held(run.state, run),
            this.#warn,
          );
  }

  /** `processBatch`: the batch's results. Rejects only under `storeFailure: 'fail'` (or a bug). */
  batch<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions,
  ): Promise<BatchResult<R>> {
    return this.#start(messages, handler, options, toBatchResult, false);
  }

  /** `process`: one message's result, or the error the policies raise (`answerOne`). */
  one<R>(message: M, handler: MessageHandler<M, R>, options: BatchOptions): Promise<ProcessResult<R>> {
    return this.single(message, handler, options, answerOne);
  }

  /** A batch of one answered by `finish` (which must not keep the results array), on a recycled state. */
  single<R, T>(
    message: M,
    handler: MessageHandler<M, R>,
    options: BatchOptions,
    finish: Finish<M, R, T>,
  ): Promise<T> {
    const spare = this.#spareCount > 0 ? this.#takeSpare() : undefined;
    const messages = (spare?.messages as M[] | undefined) ?? [];
    messages[0] = message;
    return this.#start(messages, handler, options, finish, true, spare);
  }

  /** Every call's steps: synchronous until one waits, which goes on through `#next` (no async frame). */
  #start<R, T>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions,
    finish: Finish<M, R, T>,
    recycle: boolean,
    spare?: Run<M, S>,
  ): Promise<T> {
    try {
      const run = this.#open(messages, options, recycle, spare);
      run.handler = handler as Run<M, S>['handler'];
      run.finish = finish as Run<M, S>['finish'];
      const looked = run.heads.length > 0 ? this.#lookup(run) : undefined;
      if (looked !== undefined) return looked.then(() => this.#handle(run, options)) as Promise<T>;
      return Promise.resolve(this.#handle(run, options) as T);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** The handlers, once the store call answered, with the batch's claims renewed while they run. */
  #handle(run: Run<M, S>, options: BatchOptions): unknown {
    if (this.#renewer !== undefined && run.heads.length > 0) this.#renewer.track(run, options.renewalSignal);
    const { handler } = run;
    if (typeof handler === 'function') return this.#steps(run, 0, undefined);
    const next = this.#next(run);
    return this.#runBatch(run.state, run, handler as BatchHandler<M>).then(next.end, next.abort);
  }

  /** Decide, call, report for messages `from` on, then `#end`; `decided`: message `from`'s awaited decision. */
  #steps(run: Run<M, S>, from: number, decided: Pending | null | undefined): unknown {
    try {
      for (let i = from; i < run.messages.length; i++) {
        const pending = decided === undefined ? this.#decide(run.state, run, i) : decided;
        decided = undefined;
        if (pending === undefined || pending === null) continue;
        run.at = i;
        if (pending instanceof Promise) {
          const next = this.#next(run);
          return pending.then(next.decided, next.abort);
        }
        const handler = run.handler as MessageHandler<M, unknown>;
        const message = run.messages[i] as M;
        let out: unknown;
        try {
          out =
            run.trace === undefined
              ? handler(message, pending.context)
              : run.trace.call(i, handler, message, pending.context);
        } catch (error) {
          this.#handlerFailed(run, i, pending.context, error);
          continue;
        }
        if (isThenable(out)) {
          const next = this.#next(run);
          return Promise.resolve(out).then(next.value, next.error);
        }
        this.#took(run, out);
      }
    } catch (error) {
      return this.#abort(run, error);
    }
    return this.#end(run);
  }

  /** The run's continuations, made on first use and kept with a recycled state: a `wrap` call makes no closure. */
  #next(run: Run<M, S>): Continuations {
    return run.next ?? this.#continue(run);
  }

  /** Apart from `#next`: a function that makes closures allocates their context on each entry. */
  #continue(run: Run<M, S>): Continuations {
    run.next = {
      value: (value) => this.#resume(run, value, false),
      error: (error) => this.#resume(run, error, true),
      decided: (pending) => this.#steps(run, run.at, (pending as Pending | undefined) ?? null),
      end: () => this.#end(run),
      close: () => this.#close(run),
      abort: (error) => this.#abort(run, error),
    };
    return run.next;
  }

  /** Message `run.at`'s handler answered (`failed`: with an error); the steps go on after it. */
  #resume(run: Run<M, S>, outcome: unknown, failed: boolean): unknown {
    try {
      if (failed) this.#handlerFailed(run, run.at, run.pending.context, outcome);
      else this.#took(run, outcome);
    } catch (error) {
      return this.#abort(run, error);
    }
    return this.#steps(run, run.at + 1, undefined);
  }

  /** Message `run.at`'s handler returned `value`; a failure to record it fails the message. */
  #took(run: Run<M, S>, value: unknown): void {
    const { pending, at } = run;
    try {
      this.#succeeded(run, at, pending, value);
    } catch (error) {
      this.#handlerFailed(run, at, pending.context, error);
    }
  }

  /** Settles a batch whose handlers are done, then counts it and answers `finish`. */
  #end(run: Run<M, S>): unknown {
    this.#renewer?.untrack(run);
    const settled = this.#rule.settle(run.state, run, this.#guard);
    return settled === undefined ? this.#close(run) : settled.then(this.#next(run).close);
  }

  /** Something threw unexpectedly: the batch still settles (no claim stranded), then the error is raised. */
  #abort(run: Run<M, S>, error: unknown): unknown {
    this.#renewer?.untrack(run);
    const settled = this.#rule.settle(run.state, run, this.#guard);
    if (settled === undefined) throw error;
    return settled.then(() => {
      throw error;
    });
  }

  /** Counts a settled batch and answers it; a batch of one from `single` then gives its state back. */
  #close(run: Run<M, S>): unknown {
    const { results } = run;
    for (let i = 0; i < results.length; i++) {
      const r = results[i] as ProcessResult;
      count(this.#stats, r.outcome);
      if (r.failOpen) this.#stats.failOpen++;
    }
    run.trace?.close(results);
    try {
      return run.finish!(results, this.#options);
    } finally {
      // Every store call of the batch has been answered: nothing refers to its state any more.
      if (run.recycle) this.#recycle(run);
    }
  }

  /**
   * Working states of finished batches of one, for later calls (their allocations are most of a `wrap` call's
   * cost); only a call that ran to its end gives its state back, so no two calls share one.
   */
  readonly #spares: (Run<M, S> | undefined)[] = [];
  #spareCount = 0;

  #takeSpare(): Run<M, S> {
    const at = --this.#spareCount;
    const spare = this.#spares[at] as Run<M, S>;
    // Cleared, not popped: popping to empty shrinks the array's storage, and the next give grows it again.
    this.#spares[at] = undefined;
    return spare;
  }

  /** Drops what a finished batch of one refers to and keeps it. */
  #recycle(run: Run<M, S>): void {
    (run.messages as (M | undefined)[])[0] = undefined;
    run.ids[0] = undefined;
    run.keys[0] = undefined;
    run.results[0] = undefined as unknown as ProcessResult;
    if (run.fingerprints !== undefined) run.fingerprints[0] = undefined;
    if (run.kept !== undefined) run.kept[0] = undefined;
    run.observe = undefined;
    run.trace = undefined;
    run.placeOf = undefined;
    run.handler = undefined;
    run.pending.context = NO_ID;
    run.pending.extra = undefined;
    if (this.#spareCount < MAX_SPARES) this.#spares[this.#spareCount++] = run;
  }

  /** A batch's working state: ids read, keys given by the rule, first occurrences found. */
  #open(
    messages: readonly M[],
    options: BatchOptions,
    recycle: boolean,
    spare: Run<M, S> | undefined,
  ): Run<M, S> {
    const stream = options.stream ?? DEFAULT_STREAM;
    const run = spare === undefined ? this.#make(messages, options, stream, recycle) : spare;
    if (spare !== undefined) {
      run.messages = messages;
      run.stream = stream;
      run.failOpen = false;
      run.handlerThrew = false;
      run.observe = options.onStoreCall;
      run.placeOf = options.placeOf;
    }
    this.#readIds(run);
    run.state = this.#rule.begin(run, spare?.state);
    findHeads(run);
    if (this.#telemetry !== undefined) {
      run.trace = new BatchTelemetry(this.#telemetry, run.ids, options);
      run.observe = run.trace.observe;
    }
    return run;
  }

  /** A fresh working state; a batch of one gets packed one-element arrays, cheaper than holey ones. */
  #make(messages: readonly M[], options: BatchOptions, stream: string, recycle: boolean): Run<M, S> {
    const n = messages.length;
    const one = n === 1;
    return {
      messages,
      stream,
      ids: one ? [undefined] : new Array(n),
      keys: one ? [undefined] : new Array(n),
      results: one ? [undefined as unknown as ProcessResult] : new Array(n),
      failOpen: false,
      handlerThrew: false,
      head: one ? [-1] : new Array(n),
      winner: one ? [-1] : new Array(n),
      heads: NO_HEADS,
      observe: options.onStoreCall,
      trace: undefined,
      placeOf: options.placeOf,
      fingerprints: this.#fingerprint === undefined ? undefined : one ? [undefined] : new Array(n),
      kept: this.#keepValues || this.#keepFailures ? (one ? [undefined] : new Array(n)) : undefined,
      state: undefined as S,
      pending: { context: NO_ID, outcome: 'no-id', extra: undefined },
      renewalSlot: -1,
      renewalSignal: undefined,
      recycle,
      handler: undefined,
      finish: undefined,
      at: 0,
      next: undefined,
    };
  }

  /** The store call before any handler, under the store-failure policy; undefined when it is done. */
  #lookup(run: Run<M, S>): Promise<void> | undefined {
    const start = this.#guard.start(run);
    try {
      const looked = this.#rule.lookup(run.state, run);
      if (looked !== undefined) {
        return looked.then(
          () => this.#lookedUp(run, start),
          (error: unknown) => this.#lookupFailed(run, start, error),
        );
      }
      this.#guard.succeeded(run, 'lookup', start);
    } catch (error) {
      this.#lookupFailed(run, start, error);
    }
    return undefined;
  }

  #lookedUp(run: Run<M, S>, start: number): void {
    try {
      this.#guard.succeeded(run, 'lookup', start);
    } catch (error) {
      this.#lookupFailed(run, start, error);
    }
  }

  /** The read failed: raised under `fail`; under `process` every id of the batch is handled as new. */
  #lookupFailed(run: Run<M, S>, start: number, error: unknown): void {
    this.#guard.failed(run, 'lookup', start, error, []);
    run.failOpen = true;
  }

  /** Reads each message's id and fingerprint; an unusable one fails the message, a missing id follows `nullId`. */
  #readIds(batch: Batch<M>): void {
    const { messages, ids, results, fingerprints } = batch;
    const reject = this.#options.nullId === 'reject';
    const { idOf } = this.#traits;
    let missing = 0;
    for (let i = 0; i < messages.length; i++) {
      let id: string | undefined;
      try {
        id = idOf(messages[i] as M);
        ids[i] = id;
        if (id === undefined) {
          if (reject) results[i] = { outcome: 'failed', id, error: this.#noIdError() };
          else missing++;
        }
      } catch (error) {
        results[i] = { outcome: 'failed', id: undefined, error };
      }
      if (fingerprints === undefined || id === undefined || results[i] !== undefined) continue;
      try {
        fingerprints[i] = (this.#fingerprint as (message: M) => string)(messages[i] as M);
      } catch (error) {
        results[i] = { outcome: 'failed', id, error };
      }
    }
    if (missing > 0 && missing === messages.length && !this.#warnedNoId) this.#warnNoId(missing);
  }

  #noIdError(): NoMessageIdError {
    return new NoMessageIdError(
      `message has no id ${this.#traits.idWhere} (nullId: 'reject'; 'forward' handles such messages without dedup)`,
    );
  }

  /** Not one message of a batch had an id: most likely the id path is wrong. Said once per consumer. */
  #warnNoId(count: number): void {
    this.#warnedNoId = true;
    const what = count === 1 ? 'a message had' : `all ${count} messages of a batch had`;
    this.#warn(
      `${what} no id ${this.#traits.idWhere} and ${count === 1 ? 'was' : 'were'} handled without deduplication ` +
        `(${this.#traits.forwardsNoId}); check the id path, or set nullId: 'reject' to refuse such messages`,
      'IDEM_NO_ID',
    );
  }

  /** The decision for message `i`: its handler's context, or undefined when its result is already final. */
  #decide(state: S, batch: Run<M, S>, i: number): Pending | undefined | Promise<Pending | undefined> {
    const { results } = batch;
    if (results[i] !== undefined) return undefined;
    this.#rule.receive?.(state, batch, i);
    const id = batch.ids[i];
    if (id === undefined) return pend(batch, NO_ID, 'no-id', undefined);
    // -1 for an id the rule does not look up (e.g. an invalid event timestamp): it forwards or fails it.
    const head = batch.head[i] as number;
    const holder = head === -1 ? -1 : (batch.winner[head] as number);
    const decision = this.#rule.decide(state, batch, i, holder === -1 ? undefined : holder);
    if (decision.kind === 'fail') {
      results[i] = { outcome: 'failed', id, error: decision.error };
      return undefined;
    }
    if (batch.keys[i] === undefined) {
      return pend(
        batch,
        { id, duplicate: false },
        'processed',
        decision.kind === 'new' ? decision.extra : undefined,
      );
    }
    if (decision.kind === 'new') {
      if (decision.claims) batch.winner[head] = i;
      const extra = batch.failOpen ? { ...decision.extra, failOpen: true as const } : decision.extra;
      return pend(batch, { id, duplicate: false }, 'processed', extra);
    }
    const { existing } = decision;
    if (batch.fingerprints !== undefined) {
      // Another payload under the same id is a conflict; a record kept without a fingerprint matches any.
      const actual = batch.fingerprints[i];
      const expected = holder !== -1 ? batch.fingerprints[holder] : existing?.fingerprint;
      if (
        actual !== undefined &&
        expected !== undefined &&
        !fingerprintMatches(this.#options.fingerprint, actual, expected)
      ) {
        const error = new IdempotencyConflictError(id, expected, actual);
        results[i] = { outcome: 'conflict', id, existing, error };
        return undefined;
      }
    }
    if (existing?.state === 'in-flight' && this.#options.inProgress === 'error') {
      results[i] = { outcome: 'in-progress', id, existing };
      return undefined;
    }
    const context: HandlerContext = { id, duplicate: true, existing };
    // What the first message left to replay: this batch's winner's outcome, or the stored record's.
    const stored = holder !== -1 ? batch.kept?.[holder] : existing?.result;
    return this.#options.onDuplicate
      ? this.#hook(state, batch, i, context, stored, holder)
      : this.#duplicate(batch, i, context, stored);
  }

  /** Calls `onDuplicate`; its failure is this message's failure, and the rest of the batch goes on. */
  async #hook(
    state: S,
    batch: Run<M, S>,
    i: number,
    context: HandlerContext,
    stored: string | undefined,
    holder: number,
  ): Promise<Pending | undefined> {
    try {
      await this.#options.onDuplicate?.(
        batch.messages[i] as M,
        context,
        this.#audit(batch, i, context, holder),
      );
    } catch (error) {
      batch.results[i] = { outcome: 'failed', id: context.id, existing: context.existing, error };
      this.#rule.handled(state, batch, i, false);
      return undefined;
    }
    return this.#duplicate(batch, i, context, stored);
  }

  /** The duplicate's audit record for `onDuplicate` (docs/engine.md). */
  #audit(batch: Run<M, S>, i: number, context: HandlerContext, holder: number): DuplicateRecord {
    const { existing } = context;
    const id = context.id as string;
    const place = batch.placeOf?.(i);
    let reason: DuplicateRecord['reason'] = 'batch';
    let firstPlace: DuplicateRecord['firstPlace'];
    let firstSeen: number | undefined;
    let firstSeenFrom: DuplicateRecord['firstSeenFrom'];
    if (holder !== -1) firstPlace = batch.placeOf?.(holder);
    else if (existing !== undefined) {
      reason = existing.state === 'in-flight' ? 'in-flight' : 'stored';
      // A record of an older version has no first-seen time: then its event time, or its retention end less the TTL.
      if (existing.firstSeenAt !== undefined) {
        firstSeen = existing.firstSeenAt;
        firstSeenFrom = 'record';
      } else if (existing.eventTime !== undefined) {
        firstSeen = existing.eventTime;
        firstSeenFrom = 'event-time';
      } else if (existing.state === 'confirmed' && this.#traits.retentionMs !== undefined) {
        firstSeen = existing.expiresAt - this.#traits.retentionMs;
        firstSeenFrom = 'retention';
      }
    }
    return { id, reason, place, firstPlace, firstSeen, firstSeenFrom, existing };
  }

  /** A duplicate skips the handler (answered with the outcome kept, if any), or reaches it marked. */
  #duplicate(
    batch: Run<M, S>,
    i: number,
    context: HandlerContext,
    stored: string | undefined,
  ): Pending | undefined {
    const { existing, id } = context;
    if (!this.#options.skipDuplicate) return pend(batch, context, 'duplicate', { existing });
    if (stored === undefined && batch.kept === undefined) {
      batch.results[i] = { outcome: 'duplicate', id, existing };
      return undefined;
    }
    const replay = this.#codec.decode(id as string, stored);
    if (replay.kind === 'none') {
      batch.results[i] = { outcome: 'duplicate', id, existing, replayed: false };
    } else if (replay.kind === 'unreadable') {
      // Fail closed: neither the handler runs again nor an unverified outcome is replayed.
      batch.results[i] = { outcome: 'failed', id, existing, error: replay.error };
    } else {
      this.#stats.replayed++;
      batch.results[i] =
        replay.kind === 'value'
          ? { outcome: 'duplicate', id, existing, result: replay.value, replayed: true }
          : { outcome: 'failed', id, existing, error: replay.error, replayed: true };
    }
    return undefined;
  }

  /** Message `i`'s handler returned `value`: its result, and its value kept under `storeResult`. */
  #succeeded(batch: Run<M, S>, i: number, pending: Pending, value: unknown): void {
    batch.trace?.handled(i);
    const { extra, context, outcome } = pending;
    // The pending outcome goes with its context (a `no-id` context has no id): the union is kept by construction.
    let result = (
      extra === undefined
        ? { outcome, id: context.id, result: value }
        : { outcome, id: context.id, result: value, ...extra }
    ) as ProcessResult;
    if (this.#keepValues && outcome === 'processed' && batch.keys[i] !== undefined) {
      // Handled as new after a failed store read (`storeFailure: 'process'`): no claim to keep the value in.
      const text = batch.failOpen ? undefined : this.#codec.encodeValue(value, batch.ids[i] as string);
      (batch.kept as (string | undefined)[])[i] = text;
      if (text === undefined) this.#stats.resultsNotKept++;
      result = { ...result, resultKept: text !== undefined };
    }
    batch.results[i] = result;
    this.#rule.handled(batch.state, batch, i, true);
  }

  #handlerFailed(run: Run<M, S>, i: number, context: HandlerContext, error: unknown): void {
    if (error instanceof RunAgain) throw error;
    run.trace?.handled(i);
    run.results[i] = { outcome: 'failed', id: context.id, error };
    this.#failed(run.state, run, i, context, error);
  }

  /** Whole-batch handler: decide every message (assuming success), one call, then report per message. */
  async #runBatch(state: S, batch: Run<M, S>, handler: BatchHandler<M>): Promise<void> {
    const { messages, results } = batch;
    const items: BatchItem<M>[] = [];
    // Item k's result if the handler does not fail it: no value per message, so no `result`. No spread where
    // there is nothing to add (the node's chunk runs this per record).
    const done: ProcessResult[] = [];
    for (let i = 0; i < messages.length; i++) {
      let p = this.#decide(state, batch, i);
      if (p instanceof Promise) p = await p;
      if (p === undefined) continue;
      items.push({ message: messages[i] as M, context: p.context, index: i });
      const { outcome, context, extra } = p;
      done.push(
        (extra === undefined
          ? { outcome, id: context.id }
          : { outcome, id: context.id, ...extra }) as ProcessResult,
      );
      this.#rule.handled(state, batch, i, true);
    }
    if (items.length === 0) return;
    let failures: ReadonlyMap<number, unknown> | undefined;
    try {
      const reply = await (batch.trace === undefined
        ? handler.batch(items)
        : batch.trace.callBatch(handler, items));
      if (reply?.failed?.length) failures = new Map(reply.failed.map((f) => [f.index, f.error]));
    } catch (error) {
      batch.handlerThrew = true;
      failures = new Map(items.map((item) => [item.index, error]));
    }
    for (let k = 0; k < items.length; k++) {
      const { index, context } = items[k] as BatchItem<M>;
      if (!failures?.has(index)) results[index] = done[k] as ProcessResult;
      else {
        const error = failures.get(index);
        results[index] = { outcome: 'failed', id: context.id, error };
        this.#failed(state, batch, index, context, error);
      }
    }
  }

  /** A failed message gives up its key, so a later copy is judged afresh; unless its failure is kept. */
  #failed(state: S, batch: Batch<M>, i: number, context: HandlerContext, error: unknown): void {
    const head = batch.head[i] as number;
    if (!context.duplicate && head !== -1 && batch.winner[head] === i) {
      const kept = this.#keepFailures ? batch.kept : undefined;
      if (kept !== undefined) kept[i] = this.#codec.encodeFailure(error, batch.ids[i] as string);
      if (kept?.[i] === undefined) batch.winner[head] = -1;
    }
    this.#rule.handled(state, batch, i, false);
  }

  /** The store-failure policy, written once for every store call of every mode. */
  readonly #guard: StoreGuard = {
    // Shared functions, not closures per engine: every store call of every consumer calls the same ones.
    start: startStoreCall,
    succeeded: storeCallSucceeded,
    failed: (batch, operation, start, error, affected) => {
      const failure = toRepositoryError(operation, error);
      batch.observe?.({ operation, ms: performance.now() - start, error: failure });
      if (!goesOnAfter(this.#options.storeFailure, failure)) {
        batch.trace?.abort(failure); // the call rejects: no outcome will be reported
        throw failure;
      }
      for (const i of affected) {
        const r = batch.results[i];
        if (r && !r.failOpen) batch.results[i] = { ...r, failOpen: true };
      }
    },
    ignored: storeCallIgnored,
  };
}

/**
 * Whether a batch goes on past a failed store call (its messages handled fail-open): only under
 * `storeFailure: 'process'`, and only past the store's own failure; anything else (a closed store, a bug) rejects.
 */
export function goesOnAfter(storeFailure: 'fail' | 'process', failure: unknown): boolean {
  return storeFailure === 'process' && failure instanceof RepositoryError;
}

function startStoreCall(batch: Batch<unknown>): number {
  return batch.observe ? performance.now() : 0;
}

function storeCallSucceeded(batch: Batch<unknown>, operation: string, start: number): void {
  batch.observe?.({ operation, ms: performance.now() - start });
}

function storeCallIgnored(batch: Batch<unknown>, operation: string, start: number, error: unknown): void {
  batch.observe?.({ operation, ms: performance.now() - start, error: toRepositoryError(operation, error) });
}

/** Thrown by a runner's handler wrapper to end a run: settled, counted nothing, and run again by the runner. */
export class RunAgain extends Error {
  constructor() {
    super('the run is discarded and runs again');
  }
}

const NO_HEADS: readonly number[] = Object.freeze([]);
const FIRST_HEAD: readonly number[] = Object.freeze([0]);

export function toBatchResult<R>(results: ProcessResult<R>[]): BatchResult<R> {
  return { results };
}

/** A batch of one's result as `process` answers it: an outcome, or the error the policies raise. */
export function answerOne<R>(
  results: ProcessResult<R>[],
  options: Pick<ResolvedConsumerOptions<unknown>, 'onConflict'>,
): ProcessResult<R> {
  const result = results[0] as ProcessResult<R>;
  if (result.outcome === 'failed') throw result.error;
  if (result.outcome === 'conflict' && options.onConflict === 'error') throw result.error;
  if (result.outcome === 'in-progress') {
    throw new InProgressError(result.id as string, result.existing?.leaseExpiresAt);
  }
  return result;
}

/** Finds each key's first occurrence (`head`, `heads`): only those are looked up; a repeat is decided against it. */
function findHeads(batch: Batch<unknown>): void {
  const { keys, results, head, winner } = batch;
  if (keys.length === 1) {
    const present = keys[0] !== undefined && results[0] === undefined;
    head[0] = present ? 0 : -1;
    winner[0] = -1;
    batch.heads = present ? FIRST_HEAD : NO_HEADS;
    return;
  }
  const heads: number[] = [];
  batch.heads = heads;
  const firstOf = new Map<string, number>();
  for (let i = 0; i < keys.length; i++) {
    winner[i] = -1;
    const key = keys[i];
    if (key === undefined || results[i] !== undefined) {
      head[i] = -1;
      continue;
    }
    const h = firstOf.get(key);
    if (h !== undefined) {
      head[i] = h;
      continue;
    }
    firstOf.set(key, i);
    head[i] = i;
    heads.push(i);
  }
}

/** A batch with the rule's state for it (the engine's view; a rule sees the batch). */
interface Run<M, S> extends Batch<M>, Renewable {
  state: S;
  /** The decision `#decide` answers, one object per batch: used before the next message is decided. */
  readonly pending: Pending;
  messages: readonly M[];
  stream: string;
  observe: ((call: StoreCall) => void) | undefined;
  trace: BatchTelemetry | undefined;
  placeOf: BatchOptions['placeOf'];
  /** Made by `single`: its working state is recycled once the call has finished. */
  readonly recycle: boolean;
  handler: MessageHandler<M, unknown> | BatchHandler<M> | undefined;
  finish: Finish<M, unknown, unknown> | undefined;
  /** The message whose decision or handler a continuation waits for. */
  at: number;
  next: Continuations | undefined;
}

type Continuations = Readonly<Record<'value' | 'error' | 'decided' | 'end' | 'close' | 'abort', Step>>;
type Step = (value?: unknown) => unknown;

/** A message decided for its handler, with the result it gets when the handler succeeds. */
interface Pending {
  context: HandlerContext;
  outcome: 'processed' | 'duplicate' | 'no-id';
  extra: Pick<ProcessResult, 'existing' | 'failOpen' | 'invalidInput'> | undefined;
}

/** Sets the batch's one decision object (see `Run.pending`) and answers it. */
function pend(
  run: { readonly pending: Pending },
  context: HandlerContext,
  outcome: Pending['outcome'],
  extra: Pending['extra'],
): Pending {
  const { pending } = run;
  pending.context = context;
  pending.outcome = outcome;
  pending.extra = extra;
  return pending;
}
