import { InvalidInputError, NoMessageIdError, RepositoryError, toRepositoryError } from '../errors.js';
import { toKey } from '../repositories/ids.js';
import type { AddEntry, IdempotencyRecord, IdempotentRepository } from '../repositories/types.js';
import { timestampReader, toEpochMs } from './event-timestamp.js';
import { idExtractor } from './message-id.js';
import type { ResolvedConsumerOptions, ResolvedEventTimeOptions } from './options.js';
import { type ConsumerStats, count } from './stats.js';
import { purgedAt, retained, StreamTimes, within } from './stream-time.js';
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

/** The stream of `process`/`wrap` calls and of batches that name none. */
export const DEFAULT_STREAM = 'default';

/**
 * The store key of an id on a stream. Ids are per stream, as Kafka Streams keeps one store per partition;
 * the stream's JSON string delimits itself, so no two (stream, id) pairs share a key.
 */
export function eventTimeKey(stream: string, id: string): string {
  return JSON.stringify(stream) + id;
}

/** Counts that only event-time mode has; the outcomes themselves go to the consumer's stats. */
export interface EventTimeStats {
  /** Records late by strictly more than the interval, forwarded and (as KIP-655 says) not kept. */
  lateForwarded: number;
  /** Records whose event timestamp was missing or invalid (failed or forwarded, by policy). */
  invalidTimestamp: number;
  /** Kept records the store still held past their purge time, replaced by remove + add (see docs). */
  rewritten: number;
}

const NO_ID: HandlerContext = Object.freeze({ id: undefined, duplicate: false });

/** The optional fields of a successful result. */
type Extra = Pick<ProcessResult, 'existing' | 'failOpen' | 'invalidInput'>;

/** A handler call decided during the scan, with the result it gets when it succeeds. */
interface Queued<M> {
  readonly item: BatchItem<M>;
  readonly outcome: Outcome;
  readonly extra: Extra;
}

/** A batch once its timestamps, ids and store keys are read. */
interface Parsed<R> {
  readonly results: ProcessResult<R>[];
  readonly ids: (string | undefined)[];
  readonly keys: (string | undefined)[];
  readonly times: (number | InvalidInputError)[];
  /** Keys to read from the store: those of messages with an id and a valid timestamp. */
  readonly lookup: Set<string>;
  /** The time the store read is judged at (see `#read`). */
  readAt: number;
}

/** The working state of one batch while its messages are decided in order. */
interface Batch<M, R> extends Parsed<R> {
  readonly handler: MessageHandler<M, R> | BatchHandler<M>;
  /** Event time of the record kept for each key: from the store, then as this batch forwards. */
  readonly kept: Map<string, number>;
  /** Keys forwarded (and kept) by this batch, with their event time: written once handlers are done. */
  readonly written: Map<string, number>;
  readonly queued: Queued<M>[];
  readonly failOpen: boolean;
  /** The stream time at the message being decided. */
  streamTime: number;
}

/**
 * Event-time deduplication (KIP-655) behind {@link IdempotentConsumer} when `eventTime` is set.
 *
 * Each stream (a Kafka partition) has its own stream time and its own ids. A batch costs one `getMany` before
 * any handler runs and one `addMany` after: records are written only once their handler succeeded, so a
 * failed record is not kept. Messages are decided one by one in input order, each against the stream time
 * at its own position, which gives the same answers however the stream is cut into batches. Batches of one
 * stream are serialized inside this instance; two instances must never process the same stream at once.
 */
export class EventTimeDeduplicator<M> {
  /** Event-time counters (late records, invalid timestamps, rewrites). */
  readonly stats: EventTimeStats = { lateForwarded: 0, invalidTimestamp: 0, rewritten: 0 };
  readonly #options: ResolvedConsumerOptions<M>;
  readonly #intervalMs: number;
  readonly #extraRetentionMs: number;
  readonly #forwardInvalid: boolean;
  readonly #repository: IdempotentRepository;
  readonly #counts: ConsumerStats;
  readonly #keyOf: (message: M) => string | undefined;
  readonly #valueIdOf: ((message: M) => string | undefined) | undefined;
  readonly #timeOf: (message: M) => number | InvalidInputError;
  readonly #times = new StreamTimes();
  // The last queued batch per stream, so batches (and wrapped calls) of one stream run one after another.
  readonly #tails = new Map<string, Promise<void>>();

  constructor(
    options: ResolvedConsumerOptions<M>,
    eventTime: ResolvedEventTimeOptions<M>,
    counts: ConsumerStats,
  ) {
    this.#options = options;
    this.#intervalMs = eventTime.intervalMs;
    this.#extraRetentionMs = eventTime.extraRetentionMs;
    this.#forwardInvalid = eventTime.invalidTimestamp === 'forward';
    this.#repository = options.repository;
    this.#counts = counts;
    this.#keyOf = idExtractor(options.id);
    this.#valueIdOf = eventTime.valueId === undefined ? undefined : idExtractor(eventTime.valueId);
    this.#timeOf = timestampReader(eventTime.timestamp);
  }

  /** The stream's current stream time (largest valid timestamp seen), undefined before its first record. */
  streamTime(stream: string = DEFAULT_STREAM): number | undefined {
    return this.#times.get(stream);
  }

  /** Every stream's time, e.g. to save with committed offsets (Kafka Streams keeps it in commit metadata). */
  streamTimes(): Map<string, number> {
    return new Map(this.#times.entries());
  }

  /**
   * Raises a stream's time, e.g. to the value saved with the last committed offset, so a restarted consumer
   * judges late records as the previous one would have. A time earlier than the current one changes nothing.
   */
  restoreStreamTime(stream: string, time: number): void {
    if (toEpochMs(time) === undefined)
      throw new InvalidInputError('streamTime', `invalid time ${String(time)}`);
    this.#times.advance(stream, time);
  }

  /** Processes one message on the default stream; throws what a `failed` outcome carries. */
  async process<R>(message: M, handler: MessageHandler<M, R>): Promise<ProcessResult<R>> {
    const { results } = await this.processBatch([message], handler);
    const result = results[0] as ProcessResult<R>;
    if (result.outcome === 'failed') throw result.error;
    return result;
  }

  /** Processes a batch of one stream; see the class comment. */
  processBatch<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions = {},
  ): Promise<BatchResult<R>> {
    const stream = options.stream ?? DEFAULT_STREAM;
    const previous = this.#tails.get(stream);
    const run = previous
      ? previous.then(() => this.#batch(messages, handler, stream))
      : this.#batch(messages, handler, stream);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(stream, tail);
    void tail.then(() => {
      if (this.#tails.get(stream) === tail) this.#tails.delete(stream);
    });
    return run;
  }

  async #batch<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    stream: string,
  ): Promise<BatchResult<R>> {
    const parsed = this.#parse<R>(messages, stream);
    const { kept, failOpen } = await this.#read(parsed.lookup, parsed.readAt);
    const batch: Batch<M, R> = {
      ...parsed,
      handler,
      kept,
      failOpen,
      streamTime: this.#times.get(stream) ?? Number.NEGATIVE_INFINITY,
      written: new Map(),
      queued: [],
    };
    const start = batch.streamTime;
    for (let i = 0; i < messages.length; i++) {
      const before = batch.streamTime;
      await this.#decide(batch, messages[i] as M, i);
      // A failed record counts as not received (it is retried or dead-lettered): it does not move stream time,
      // so a retry is judged as the first attempt was.
      if (batch.results[i]?.outcome === 'failed') batch.streamTime = before;
    }
    if (batch.queued.length > 0 && !(await this.#runBatch(batch))) batch.streamTime = start;
    if (batch.streamTime > Number.NEGATIVE_INFINITY) this.#times.advance(stream, batch.streamTime);
    await this.#keep(batch.written, batch.streamTime);
    for (const r of batch.results) count(this.#counts, r.outcome);
    if (failOpen) this.#counts.failOpen += parsed.lookup.size;
    return { results: batch.results };
  }

  /** Reads each message's timestamp, id and store key; an unusable id fails the message here. */
  #parse<R>(messages: readonly M[], stream: string): Parsed<R> {
    const n = messages.length;
    const parsed: Parsed<R> = {
      results: new Array<ProcessResult<R>>(n),
      ids: new Array<string | undefined>(n),
      keys: new Array<string | undefined>(n),
      times: new Array<number | InvalidInputError>(n),
      lookup: new Set(),
      readAt: Number.POSITIVE_INFINITY,
    };
    const prefix = eventTimeKey(stream, '');
    const { maxIdBytes } = this.#repository.capabilities;
    for (let i = 0; i < n; i++) {
      const message = messages[i] as M;
      const time = this.#timeOf(message);
      parsed.times[i] = time;
      try {
        const id = this.#idOf(message);
        if (id === undefined) continue;
        parsed.ids[i] = id;
        const key = toKey(prefix + id, maxIdBytes);
        parsed.keys[i] = key;
        if (typeof time !== 'number') continue;
        parsed.lookup.add(key);
        // The stream time at any position is at least the earliest timestamp looked up (or the stored time).
        if (time < parsed.readAt) parsed.readAt = time;
      } catch (error) {
        parsed.results[i] = { outcome: 'failed', id: parsed.ids[i], error };
      }
    }
    const before = this.#times.get(stream);
    if (before !== undefined) parsed.readAt = Math.max(parsed.readAt, before);
    return parsed;
  }

  /**
   * One `getMany` for the batch, judged at a lower bound of every stream time the batch will see, so a record
   * still kept at any position is returned. Returns the event time of the record kept for each key.
   */
  async #read(
    lookup: ReadonlySet<string>,
    readAt: number,
  ): Promise<{ kept: Map<string, number>; failOpen: boolean }> {
    const kept = new Map<string, number>();
    if (lookup.size === 0) return { kept, failOpen: false };
    const keys = [...lookup];
    try {
      const records = await this.#repository.getMany(keys, { now: readAt });
      records.forEach((record, k) => {
        if (record?.eventTime !== undefined) kept.set(keys[k] as string, record.eventTime);
      });
      return { kept, failOpen: false };
    } catch (error) {
      const failure = toRepositoryError('event-time read', error);
      if (this.#options.storeFailure === 'fail' || !(failure instanceof RepositoryError)) throw failure;
      return { kept, failOpen: true };
    }
  }

  /** Decides one message against the stream time at its position, and runs (or queues) its handler. */
  async #decide<R>(batch: Batch<M, R>, message: M, i: number): Promise<void> {
    const { results } = batch;
    if (results[i]) return;
    const time = batch.times[i];
    if (typeof time === 'number' && time > batch.streamTime) batch.streamTime = time;
    const id = batch.ids[i];
    if (id === undefined) {
      // KIP-655: a null key (or value id) is always forwarded, without dedup.
      if (this.#options.nullId === 'reject')
        results[i] = { outcome: 'failed', id, error: new NoMessageIdError() };
      else await this.#run(batch, { message, context: NO_ID, index: i }, 'no-id', {});
      return;
    }
    const context: HandlerContext = { id, duplicate: false };
    if (typeof time !== 'number') {
      this.stats.invalidTimestamp++;
      if (this.#forwardInvalid)
        await this.#run(batch, { message, context, index: i }, 'processed', { invalidInput: time });
      else results[i] = { outcome: 'failed', id, error: time };
      return;
    }
    const interval = this.#intervalMs;
    const key = batch.keys[i] as string;
    const previous = batch.kept.get(key);
    // A kept record was written at a stream time at least its own timestamp; after a restart this lifts a
    // stream time rebuilt from scratch towards the one that wrote it.
    if (previous !== undefined && previous > batch.streamTime) batch.streamTime = previous;
    if (
      previous !== undefined &&
      retained(previous, batch.streamTime, interval) &&
      within(time, previous, interval)
    ) {
      const existing = keptRecord(id, previous, interval);
      const duplicate: HandlerContext = { id, duplicate: true, existing };
      await this.#options.onDuplicate?.(message, duplicate);
      if (this.#options.skipDuplicate) results[i] = { outcome: 'duplicate', id, existing };
      else await this.#run(batch, { message, context: duplicate, index: i }, 'duplicate', { existing });
      return;
    }
    // Late by strictly more than the interval: forwarded but never kept, as it would be purged at once.
    const keep = retained(time, batch.streamTime, interval);
    if (!keep) this.stats.lateForwarded++;
    const ok = await this.#run(
      batch,
      { message, context, index: i },
      'processed',
      batch.failOpen ? { failOpen: true } : {},
    );
    if (ok && keep) {
      batch.kept.set(key, time);
      batch.written.set(key, time);
    }
  }

  /** Runs one handler call (or queues it for a batch handler, assuming success); false when it failed. */
  async #run<R>(batch: Batch<M, R>, item: BatchItem<M>, outcome: Outcome, extra: Extra): Promise<boolean> {
    const { handler, results } = batch;
    if (typeof handler !== 'function') {
      batch.queued.push({ item, outcome, extra });
      return true;
    }
    try {
      const result = await handler(item.message, item.context);
      results[item.index] = { outcome, id: item.context.id, result, ...extra };
      return true;
    } catch (error) {
      results[item.index] = { outcome: 'failed', id: item.context.id, error };
      return false;
    }
  }

  /** The dedup id: the key, or the key and value id together (both must be present). */
  #idOf(message: M): string | undefined {
    const key = this.#keyOf(message);
    if (key === undefined || this.#valueIdOf === undefined) return key;
    const valueId = this.#valueIdOf(message);
    return valueId === undefined ? undefined : JSON.stringify([key, valueId]);
  }

  /** Calls a whole-batch handler; if it throws, every queued message failed and nothing is kept. */
  async #runBatch<R>(batch: Batch<M, R>): Promise<boolean> {
    const { queued, results } = batch;
    try {
      await (batch.handler as BatchHandler<M>).batch(queued.map((q) => q.item));
      for (const { item, outcome, extra } of queued) {
        results[item.index] = { outcome, id: item.context.id, ...extra };
      }
      return true;
    } catch (error) {
      for (const { item } of queued) results[item.index] = { outcome: 'failed', id: item.context.id, error };
      batch.written.clear();
      return false;
    }
  }

  /**
   * Writes the records forwarded in this batch that are still kept at its final stream time, in one `addMany`
   * judged at that stream time. `addMany` takes one TTL, so the records share the expiry of the latest one:
   * an earlier record stays in the store up to one interval (plus `extraRetentionMs`) longer than KIP-655
   * keeps it. Liveness is still judged exactly, from `eventTime`; the only cost is that a store may refuse to
   * replace such a record after this stream purged it, and then it is removed and written again (single writer
   * per stream).
   */
  async #keep(written: ReadonlyMap<string, number>, streamTime: number): Promise<void> {
    const interval = this.#intervalMs;
    const entries: AddEntry[] = [];
    let latest = Number.NEGATIVE_INFINITY;
    for (const [key, time] of written) {
      if (!retained(time, streamTime, interval)) continue;
      entries.push({ id: key, eventTime: time });
      if (time > latest) latest = time;
    }
    if (entries.length === 0) return;
    const expiresAt = purgedAt(latest, interval) + this.#extraRetentionMs;
    const options = { now: streamTime, ttlMs: expiresAt - streamTime };
    try {
      const added = await this.#repository.addMany(entries, options);
      const stale = entries.filter((_, k) => {
        const result = added[k];
        return result?.added === false && !stillKept(result.existing, streamTime, interval);
      });
      if (stale.length === 0) return;
      await Promise.all(stale.map((entry) => this.#repository.remove(entry.id)));
      await this.#repository.addMany(stale, options);
      this.stats.rewritten += stale.length;
    } catch (error) {
      // The handlers already ran: under `fail` the error reaches the caller, which then does not commit.
      const failure = toRepositoryError('event-time write', error);
      if (this.#options.storeFailure === 'fail' || !(failure instanceof RepositoryError)) throw failure;
      this.#counts.failOpen++;
    }
  }
}

/** The record a duplicate is reported against, with its expiry in stream time. */
function keptRecord(id: string, eventTime: number, intervalMs: number): IdempotencyRecord {
  return { id, state: 'confirmed', eventTime, expiresAt: purgedAt(eventTime, intervalMs) };
}

/** True when a record the store refused to replace is one this stream still keeps (another writer's). */
function stillKept(record: IdempotencyRecord, streamTime: number, intervalMs: number): boolean {
  return record.eventTime !== undefined && retained(record.eventTime, streamTime, intervalMs);
}
