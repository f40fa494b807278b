import { InvalidInputError } from '../errors.js';
import { toKey } from '../store/ids.js';
import type { AddEntry, IdempotentRepository } from '../store/types.js';
import type { Runner } from './engine.js';
import { timestampReader, toEpochMs } from './event-timestamp.js';
import { idExtractor, idSource, replayEpochPrefix } from './message-id.js';
import type { ResolvedConsumerOptions, ResolvedEventTimeOptions } from './options.js';
import {
  type Batch,
  DEFAULT_STREAM,
  type Decision,
  type DedupRule,
  type RuleTraits,
  type StoreGuard,
} from './rule.js';
import type { BatchOptions } from './types.js';

/** The store key of an id on a stream (ids are per stream); the stream's JSON string delimits itself. */
export function eventTimeKey(stream: string, id: string): string {
  return JSON.stringify(stream) + id;
}

/**
 * The shortest wall-clock life a kept record gets in a store (plus `extraRetentionMs`), so a short interval does
 * not give records a life shorter than the gap between two polls. Liveness is judged from event time anyway.
 */
export const MIN_STORE_LIFETIME_MS = 60_000;

/** Counts that only event-time mode has; the outcomes themselves go to the consumer's stats. */
export interface EventTimeStats {
  /** Records late by strictly more than the interval, forwarded and (as KIP-655 says) not kept. */
  lateForwarded: number;
  /** Records whose event timestamp was missing or invalid (failed or forwarded, by policy). */
  invalidTimestamp: number;
  /** Kept records the store still held past their purge time, replaced by remove + add (see docs). */
  rewritten: number;
}

/** What one batch of one stream works with while its messages are decided in order (`before`: its stream time). */
function batchState(n: number, before = Number.NEGATIVE_INFINITY) {
  return {
    /** Each message's event timestamp, or why it has none. */
    times: new Array<number | InvalidInputError>(n),
    /** The time the store read is judged at (see `lookup`). */
    readAt: Number.POSITIVE_INFINITY,
    /** Event time of the record kept for each key: from the store, then as this batch forwards. */
    kept: new Map<string, number>(),
    /** Keys this batch forwards and keeps, with the position that wrote them. */
    written: new Map<string, number>(),
    /** Forwarded messages that will be kept if their handler succeeds. */
    keep: new Set<number>(),
    /** The stream time when the batch started, and at the message being decided. */
    start: before,
    streamTime: before,
    /** Stream time before the last message decided, so its failure can undo its advance. */
    before,
    lastDecided: -1,
    /** Stream time lifted by stored records (a restarted consumer rebuilds towards the time that wrote them). */
    lifted: Number.NEGATIVE_INFINITY,
  };
}

type EventTimeState = ReturnType<typeof batchState>;

/**
 * Event-time deduplication (KIP-655), the engine's rule under the `eventTime` option (docs/event-time.md). Each
 * stream has its own stream time and ids; each message is judged at its own position, so batching changes no
 * answer. Batches of one stream run one after another; two instances must never share a stream.
 */
export class EventTimeDeduplicator<M> implements DedupRule<M, EventTimeState> {
  /** Event-time counters (late records, invalid timestamps, rewrites). */
  readonly stats: EventTimeStats = { lateForwarded: 0, invalidTimestamp: 0, rewritten: 0 };
  readonly traits: RuleTraits<M>;
  readonly #intervalMs: number;
  readonly #extraRetentionMs: number;
  readonly #forwardInvalid: boolean;
  readonly #repository: IdempotentRepository;
  readonly #timeOf: (message: M) => number | InvalidInputError;
  /** Stream time per stream; it only moves forward (`#advance`). */
  readonly #times = new Map<string, number>();
  /** The last queued batch per stream. */
  readonly #tails = new Map<string, Promise<unknown>>();
  /** `replayEpoch`'s prefix of every key (undefined: none). */
  readonly #epoch: string | undefined;

  constructor(options: ResolvedConsumerOptions<M>, eventTime: ResolvedEventTimeOptions<M>) {
    this.#intervalMs = eventTime.intervalMs;
    this.#extraRetentionMs = eventTime.extraRetentionMs;
    this.#forwardInvalid = eventTime.invalidTimestamp === 'forward';
    this.#epoch = replayEpochPrefix(options.replayEpoch);
    this.#repository = options.repository;
    this.#timeOf = timestampReader(eventTime.timestamp);
    const { valueId } = eventTime;
    this.traits = {
      mode: 'event-time',
      idOf: EventTimeDeduplicator.idReader(options, eventTime),
      idWhere:
        valueId === undefined
          ? idSource(options.id)
          : `${idSource(options.id)} or ${idSource(valueId, 'valueId')}`,
      forwardsNoId: 'event-time mode forwards null keys, as KIP-655 specifies',
      // A failure is never kept, and a record's life is judged from event time, not from its expiry.
      keepsFailures: false,
      retentionMs: undefined,
    };
  }

  /** The dedup id: the key, or the key and the value id (`by: 'keyValue'`; a missing one: no id). */
  static idReader<M>(
    options: ResolvedConsumerOptions<M>,
    eventTime: ResolvedEventTimeOptions<M>,
  ): (message: M) => string | undefined {
    const keyOf = idExtractor(options.id);
    if (eventTime.valueId === undefined) return keyOf;
    const valueIdOf = idExtractor(eventTime.valueId);
    return (message) => {
      const key = keyOf(message);
      if (key === undefined) return undefined;
      const valueId = valueIdOf(message);
      return valueId === undefined ? undefined : JSON.stringify([key, valueId]);
    };
  }

  /** The stream's current stream time (largest valid timestamp seen), undefined before its first record. */
  streamTime(stream: string = DEFAULT_STREAM): number | undefined {
    return this.#times.get(stream);
  }

  /** Every stream's time, e.g. to save with committed offsets (Kafka Streams keeps it in commit metadata). */
  streamTimes(): Map<string, number> {
    return new Map(this.#times);
  }

  /** Raises a stream's time (e.g. to the one saved with the last committed offset); never lowers it. */
  restoreStreamTime(stream: string, time: number): void {
    if (toEpochMs(time) === undefined)
      throw new InvalidInputError('streamTime', `invalid time ${String(time)}`);
    this.#advance(stream, time);
  }

  #advance(stream: string, time: number): void {
    const current = this.#times.get(stream);
    if (current === undefined || time > current) this.#times.set(stream, time);
  }

  /** The consumer's runner: `engine` with each stream's calls run one after another. */
  serialized(engine: Runner<M>): Runner<M> {
    return {
      one: (message, handler, options) =>
        this.#serialize(options, () => engine.one(message, handler, options)),
      batch: (messages, handler, options) =>
        this.#serialize(options, () => engine.batch(messages, handler, options)),
    };
  }

  /** Runs `work` after every earlier batch of the same stream has finished. */
  #serialize<T>({ stream = DEFAULT_STREAM }: BatchOptions, work: () => Promise<T>): Promise<T> {
    const previous = this.#tails.get(stream);
    const run = previous ? previous.then(work) : work();
    const settled = () => {
      if (this.#tails.get(stream) === tail) this.#tails.delete(stream);
    };
    const tail = run.then(settled, settled);
    this.#tails.set(stream, tail);
    return run;
  }

  begin(batch: Batch<M>): EventTimeState {
    const { messages, ids, keys, results } = batch;
    const n = messages.length;
    const before = this.#times.get(batch.stream);
    const state = batchState(n, before);
    // A replay epoch goes first: plain event-time keys start with `"`, epoch ones with NUL (see message-id.ts).
    const prefix = (this.#epoch ?? '') + eventTimeKey(batch.stream, '');
    // Keys go to the store as ids, and the store doubles an epoch key's leading NUL: one byte less for it.
    const maxIdBytes = this.#repository.capabilities.maxIdBytes - (this.#epoch === undefined ? 0 : 1);
    for (let i = 0; i < n; i++) {
      const time = this.#timeOf(messages[i] as M);
      state.times[i] = time;
      const id = ids[i];
      if (id === undefined || results[i] !== undefined) continue;
      try {
        // KIP-655: an empty key is a key; the stream prefix keeps it storable.
        const key = toKey(prefix + id, maxIdBytes);
        if (typeof time !== 'number') continue;
        keys[i] = key;
        // The stream time at any position is at least the earliest timestamp looked up (or the stored time).
        if (time < state.readAt) state.readAt = time;
      } catch (error) {
        results[i] = { outcome: 'failed', id, error };
      }
    }
    if (before !== undefined) state.readAt = Math.max(state.readAt, before);
    return state;
  }

  /** One `getMany`, judged at a lower bound of every stream time the batch will see. */
  async lookup(state: EventTimeState, batch: Batch<M>): Promise<void> {
    const keys = batch.heads.map((h) => batch.keys[h] as string);
    const records = await this.#repository.getMany(keys, { now: state.readAt });
    records.forEach((record, k) => {
      if (record?.eventTime !== undefined) state.kept.set(keys[k] as string, record.eventTime);
    });
  }

  receive(state: EventTimeState, _batch: Batch<M>, i: number): void {
    state.before = state.streamTime;
    state.lastDecided = i;
    const time = state.times[i];
    if (typeof time === 'number' && time > state.streamTime) state.streamTime = time;
  }

  decide(state: EventTimeState, batch: Batch<M>, i: number): Decision {
    const time = state.times[i] as number | InvalidInputError;
    if (typeof time !== 'number') {
      this.stats.invalidTimestamp++;
      return this.#forwardInvalid
        ? { kind: 'new', claims: false, extra: { invalidInput: time } }
        : { kind: 'fail', error: time };
    }
    const interval = this.#intervalMs;
    const key = batch.keys[i] as string;
    const previous = state.kept.get(key);
    // A kept record was written at a stream time at least its own: after a restart it lifts the stream time.
    if (previous !== undefined && previous > state.streamTime) {
      state.streamTime = previous;
      if (previous > state.lifted) state.lifted = previous;
    }
    // First received wins, within the interval: a kept record covers this one.
    if (
      previous !== undefined &&
      retained(previous, state.streamTime, interval) &&
      within(time, previous, interval)
    ) {
      // The record a duplicate is reported against, with its expiry in stream time.
      const existing = { id: batch.ids[i] as string, state: 'confirmed' as const, eventTime: previous };
      return { kind: 'existing', existing: { ...existing, expiresAt: purgedAt(previous, interval) } };
    }
    // Late by strictly more than the interval: forwarded but never kept, as it would be purged at once.
    const keep = retained(time, state.streamTime, interval);
    if (keep) state.keep.add(i);
    else this.stats.lateForwarded++;
    return { kind: 'new', claims: keep };
  }

  handled(state: EventTimeState, batch: Batch<M>, i: number, ok: boolean): void {
    const key = batch.keys[i];
    if (ok) {
      if (key !== undefined && state.keep.has(i)) {
        state.kept.set(key, state.times[i] as number);
        state.written.set(key, i);
      }
      return;
    }
    state.keep.delete(i);
    if (key !== undefined && state.written.get(key) === i) state.written.delete(key);
    // A failed record counts as not received: it does not move stream time, so its retry is judged the same.
    if (i === state.lastDecided) state.streamTime = state.before;
  }

  /** Moves stream time on by the received (not failed) records, then keeps the forwarded ones in one `addMany`. */
  async settle(state: EventTimeState, batch: Batch<M>, store: StoreGuard): Promise<void> {
    let streamTime = Math.max(state.start, state.lifted);
    // A whole-batch handler that threw leaves stream time as it was: the redelivered batch is judged the same.
    if (batch.handlerThrew) streamTime = state.start;
    else
      batch.results.forEach((r, i) => {
        const time = state.times[i];
        if (r !== undefined && r.outcome !== 'failed' && typeof time === 'number' && time > streamTime)
          streamTime = time;
      });
    if (streamTime > Number.NEGATIVE_INFINITY) this.#advance(batch.stream, streamTime);
    const written: [string, number][] = [];
    const at: number[] = [];
    for (const [key, i] of state.written) {
      if (batch.results[i]?.outcome === 'failed') continue;
      written.push([key, state.times[i] as number]);
      at.push(i);
    }
    if (written.length === 0) return;
    const start = store.start(batch);
    try {
      await this.#keep(written, streamTime);
      store.succeeded(batch, 'keep', start);
    } catch (error) {
      store.failed(batch, 'keep', start, error, at);
    }
  }

  /**
   * `addMany` takes one TTL, so the records share the latest one's expiry: an earlier one stays up to an interval
   * longer than KIP-655 keeps it (liveness is judged from `eventTime`), and one a store refuses to replace after
   * this stream purged it is removed and rewritten (single writer per stream). `minLifetimeMs` floors the
   * wall-clock life where a store's expiry runs on its own clock, since stream time stands still with the stream.
   */
  async #keep(written: readonly [string, number][], streamTime: number): Promise<void> {
    const interval = this.#intervalMs;
    const entries: AddEntry[] = [];
    let latest = Number.NEGATIVE_INFINITY;
    for (const [key, time] of written) {
      if (!retained(time, streamTime, interval)) continue;
      entries.push({ id: key, eventTime: time });
      if (time > latest) latest = time;
    }
    if (entries.length === 0) return;
    const ttlMs = purgedAt(latest, interval) + this.#extraRetentionMs - streamTime;
    const minLifetimeMs = Math.max(interval + 1, MIN_STORE_LIFETIME_MS) + this.#extraRetentionMs;
    const options = { now: streamTime, ttlMs, minLifetimeMs };
    const added = await this.#repository.addMany(entries, options);
    const stale = entries.filter((_, k) => {
      const result = added[k];
      if (result?.added !== false) return false;
      // Refused for a record this stream still keeps: another writer's, left alone.
      const { eventTime } = result.existing;
      return eventTime === undefined || !retained(eventTime, streamTime, interval);
    });
    if (stale.length === 0) return;
    await Promise.all(stale.map((entry) => this.#repository.remove(entry.id)));
    await this.#repository.addMany(stale, options);
    this.stats.rewritten += stale.length;
  }
}

// KIP-655's interval arithmetic, in epoch ms. Stream time is the largest valid event timestamp seen on a stream;
// a forwarded record is kept while its timestamp is not older than `streamTime − interval`, and purged after.

/** True while a forwarded record at `eventTime` is kept at `streamTime` (the bound itself is kept). */
function retained(eventTime: number, streamTime: number, intervalMs: number): boolean {
  return eventTime >= streamTime - intervalMs;
}

/** True when two timestamps are within the interval of each other, both bounds inclusive. */
function within(a: number, b: number, intervalMs: number): boolean {
  return Math.abs(a - b) <= intervalMs;
}

/** The first stream time at which a record at `eventTime` is purged: its `expiresAt` in stream time. */
function purgedAt(eventTime: number, intervalMs: number): number {
  return eventTime + intervalMs + 1;
}
