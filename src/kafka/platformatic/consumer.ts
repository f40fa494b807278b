import { setTimeout as delay } from 'node:timers/promises';
import {
  type ClusterMetadata,
  type Connection,
  Consumer,
  type ConsumerGroupJoinPayload,
  FetchIsolationLevels,
  ListOffsetTimestamps,
  type RecordsBatch,
} from '@platformatic/kafka';
import {
  appendTo,
  type ConsumedBatch,
  type ConsumerCrash,
  type GroupConsumer,
  type GroupConsumerOptions,
  type GroupJoin,
  type GroupMetadata,
  type KafkaLogSink,
  type PartitionFetch,
  type RunOptions,
  retrying,
  type TopicPartitions,
} from '../port/index.js';
import {
  findBy,
  GroupRebalancingError,
  isBrokerUnreachable,
  isOffsetOutOfRange,
  isPermanent,
  withBrokerDetail,
} from './errors.js';
import { dropAborted, RawFetcher } from './fetch.js';
import { connectionTo, send } from './internals.js';
import { listOffsets } from './list-offsets.js';
import type { ClientContext } from './options.js';
import { consumedMessages } from './records.js';
import { StepTimeoutError } from './time-limit.js';

/*
 * A group member over @platformatic/kafka, driven in batches. The library's stream hands records one by one and
 * pauses only as a whole, so it keeps only the membership: this member fetches itself, one fetch in flight per
 * leader, over partitions neither paused nor busy; each join (no revocation callback) rereads the commits.
 */

type LibraryConsumer = Consumer<Buffer, Buffer, Buffer, Buffer>;

interface PartitionState {
  readonly topic: string;
  readonly partition: number;
  /** Next offset to fetch; undefined until read from the committed offsets (after each join or failure). */
  position: bigint | undefined;
  busy: boolean;
  paused: boolean;
}

interface Generation {
  readonly id: number;
  readonly memberId: string;
  readonly partitions: Map<string, PartitionState>;
  /** The coordinator refused this generation's heartbeat: nothing more is fetched or handled in it. */
  lost: boolean;
}

/**
 * `extra` key for requireStable (KIP-447). Off by default: per-partition, the new owner's producer init (after the
 * first fetch) aborts the old owner's transaction, so waiting first would cost a transaction timeout per handover.
 */
export const REQUIRE_STABLE = 'requireStableOffsets';

interface OffsetFetchResponse {
  readonly groups: readonly {
    readonly topics: readonly {
      readonly name: string;
      readonly partitions: readonly { readonly partitionIndex: number; readonly committedOffset: bigint }[];
    }[];
  }[];
}

const key = (topic: string, partition: number): string => `${topic}:${partition}`;

function listen<L>(listeners: Set<L>, listener: L): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

const sleep = (ms: number, signal: AbortSignal): Promise<unknown> =>
  delay(ms, undefined, { signal }).catch(() => undefined);

export class PlatformaticGroupConsumer implements GroupConsumer {
  readonly groupId: string;
  readonly #requireStable: boolean;
  /** What each fetch asks for (the library consumer is given the same). */
  readonly #limits: Omit<PartitionFetch, 'topic' | 'partitions'>;
  #consumer: LibraryConsumer | undefined;
  #topics: string[] = [];
  #fromBeginning = false;
  #generation: Generation | undefined;
  /** Paused partitions survive a rejoin (the caller paused them, not the generation). */
  readonly #paused = new Set<string>();
  #run: RunOptions | undefined;
  #running = false;
  #abort = new AbortController();
  #loop: Promise<void> | undefined;
  readonly #handlers = new Set<Promise<void>>();
  #fetcher: RawFetcher | undefined;
  /** Leaders with a fetch in flight. */
  readonly #fetching = new Set<number>();
  #refreshing = false;
  /** Reads of the positions started: a read that ran past its time limit sets nothing once a newer one started. */
  #refreshes = 0;
  /** A step failed: the fetch loop backs off before its next round. */
  #failed = false;
  #wake: (() => void) | undefined;
  readonly #joinListeners = new Set<(join: GroupJoin) => void>();
  readonly #crashListeners = new Set<(crash: ConsumerCrash) => void>();
  readonly #fetchListeners = new Set<() => void>();

  constructor(
    private readonly context: ClientContext,
    private readonly options: GroupConsumerOptions,
    private readonly logger: KafkaLogSink | undefined,
  ) {
    this.groupId = options.groupId;
    this.#requireStable = options.requireStableOffsets ?? options.extra?.[REQUIRE_STABLE] === true;
    this.#limits = {
      maxWaitMs: options.maxWaitMs ?? 1_000,
      maxBytes: options.maxBytes ?? 16 * 1024 * 1024,
      maxBytesPerPartition: options.maxBytesPerPartition ?? 4 * 1024 * 1024,
    };
  }

  async connect(): Promise<void> {
    if (this.#consumer) return;
    const session = this.options.sessionTimeoutMs ?? 30_000;
    const heartbeat = this.options.heartbeatIntervalMs ?? Math.max(500, Math.floor(session / 10));
    this.#consumer = new Consumer({
      ...this.context.base,
      groupId: this.groupId,
      sessionTimeout: session,
      // The rebalance timeout: a member in a batch rejoins at once (the library does it in the background).
      rebalanceTimeout: Math.max(session, 10_000),
      heartbeatInterval: Math.min(heartbeat, session),
      maxWaitTime: this.#limits.maxWaitMs,
      maxBytes: this.#limits.maxBytes,
      maxBytesPerPartition: this.#limits.maxBytesPerPartition,
      minBytes: 1,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
    });
    this.context.watch(this.#consumer);
    this.#consumer.on('consumer:group:join', (payload) => this.#joined(payload));
    this.#consumer.on('error', (error: Error) => this.#crashed(error));
    // Reach a broker now, so that a wrong address fails the connect rather than the first fetch.
    await this.#consumer.metadata({ topics: [] });
  }

  async subscribe(topics: readonly string[], fromBeginning: boolean): Promise<void> {
    const consumer = this.#need();
    this.#topics = [...topics];
    this.#fromBeginning = fromBeginning;
    for (const topic of topics) consumer.topics.track(topic);
  }

  async run(options: RunOptions): Promise<void> {
    const consumer = this.#need();
    this.#run = options;
    // Already running (a supervisor's restart): this member rejoins by itself; only the handler is new.
    if (this.#running) return;
    this.#running = true;
    this.#abort = new AbortController();
    try {
      await consumer.joinGroup({});
    } catch (error) {
      this.#running = false;
      // Refused for good (a session timeout out of the broker's range, an ACL): a crash without restart, as kafkajs.
      if (!isPermanent(error)) throw error;
      this.#crashed(error as Error);
      return;
    }
    this.#loop = this.#fetchLoop(this.#abort.signal);
  }

  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#abort.abort();
    this.#wake?.();
    await this.#loop;
    await Promise.allSettled([...this.#handlers]);
    this.#generation = undefined;
    try {
      await this.#consumer?.leaveGroup(false);
    } catch (error) {
      this.warn('leaving the group failed', { err: error });
    }
  }

  async disconnect(): Promise<void> {
    await this.stop();
    const consumer = this.#consumer;
    this.#consumer = undefined;
    await this.#fetcher?.close();
    this.#fetcher = undefined;
    await consumer?.close(true);
  }

  pause(partitions: readonly TopicPartitions[]): void {
    this.#setPaused(partitions, true);
  }

  resume(partitions: readonly TopicPartitions[]): void {
    this.#setPaused(partitions, false);
    this.#wake?.();
  }

  #setPaused(partitions: readonly TopicPartitions[], paused: boolean): void {
    for (const { topic, partitions: ids } of partitions) {
      for (const p of ids) {
        const k = key(topic, p);
        if (paused) this.#paused.add(k);
        else this.#paused.delete(k);
        const state = this.#generation?.partitions.get(k);
        if (state) state.paused = paused;
      }
    }
  }

  groupMetadata(): GroupMetadata {
    const generation = this.#generation;
    return { groupId: this.groupId, generationId: generation?.id, memberId: generation?.memberId };
  }

  /** This member owns the partition in its current generation (else a transaction refuses its offsets). */
  owns(topic: string, partition: number): boolean {
    const generation = this.#generation;
    return generation !== undefined && !generation.lost && generation.partitions.has(key(topic, partition));
  }

  /** Where a transaction's offsets go. */
  coordinatorId(): number | undefined {
    return this.#consumer?.coordinatorId ?? undefined;
  }

  onGroupJoin(listener: (join: GroupJoin) => void): () => void {
    return listen(this.#joinListeners, listener);
  }

  onCrash(listener: (crash: ConsumerCrash) => void): () => void {
    return listen(this.#crashListeners, listener);
  }

  onFetchStart(listener: () => void): () => void {
    return listen(this.#fetchListeners, listener);
  }

  warn(message: string, fields: object = {}): void {
    this.logger?.warn({ ...fields, groupId: this.groupId }, message);
  }

  #need(): LibraryConsumer {
    if (!this.#consumer) throw new Error(`consumer of group ${this.groupId}: connect() first`);
    return this.#consumer;
  }

  #joined(payload: ConsumerGroupJoinPayload): void {
    const partitions = new Map<string, PartitionState>();
    const assignment: Record<string, number[]> = {};
    for (const { topic, partitions: ids } of payload.assignments ?? []) {
      assignment[topic] = [...ids].sort((a, b) => a - b);
      for (const partition of ids) {
        const k = key(topic, partition);
        const busy = this.#generation?.partitions.get(k)?.busy ?? false;
        partitions.set(k, { topic, partition, position: undefined, busy, paused: this.#paused.has(k) });
      }
    }
    this.#generation = {
      id: payload.generationId ?? -1,
      memberId: payload.memberId,
      partitions,
      lost: false,
    };
    const join: GroupJoin = { memberId: payload.memberId, generationId: payload.generationId, assignment };
    for (const listener of this.#joinListeners) listener(join);
    this.#wake?.();
  }

  /** The library gave up rejoining the group: while running, this member keeps trying; the crash is reported. */
  #crashed(error: Error): void {
    this.warn('the consumer lost its group', { err: error });
    for (const listener of this.#crashListeners) listener({ error, restart: this.#running });
    if (!this.#running) return;
    const signal = this.#abort.signal;
    void sleep(1_000, signal).then(() => {
      if (!signal.aborted) this.#consumer?.joinGroup({}).catch((error: Error) => this.#crashed(error));
    });
  }

  async #fetchLoop(signal: AbortSignal): Promise<void> {
    let failures = 0;
    while (!signal.aborted) {
      this.#startWork(signal, () => {
        failures = 0;
      });
      if (this.#failed) {
        this.#failed = false;
        await sleep(Math.min(10_000, 200 * 2 ** Math.min(++failures, 6)), signal);
      } else await new Promise<void>((resolve) => (this.#wake = resolve));
    }
  }

  /** Starts a read of the positions not known and a fetch per leader with none in flight; each wakes the loop. */
  #startWork(signal: AbortSignal, succeeded: () => void): void {
    const generation = this.#generation;
    const consumer = this.#consumer;
    // A lost generation waits for the library's rejoin (its next join starts a new one).
    if (generation === undefined || generation.lost || consumer === undefined) return;
    const idle = [...generation.partitions.values()].filter((s) => !s.busy);
    const unknown = idle.filter((s) => s.position === undefined);
    if (unknown.length > 0 && !this.#refreshing) {
      this.#refreshing = true;
      const refresh = ++this.#refreshes;
      this.#limited('reading the positions', this.#refreshPositions(consumer, generation, unknown, refresh))
        .then(succeeded, (error: unknown) => {
          // A step past its time limit has said so already.
          if (!signal.aborted && !(error instanceof StepTimeoutError)) {
            this.warn('reading the committed offsets failed; retrying', { err: error });
          }
          this.#failed = true;
        })
        .finally(() => {
          this.#refreshing = false;
          this.#wake?.();
        });
    }
    const ready = idle.filter((s) => s.position !== undefined && !s.paused);
    if (ready.length === 0) return;
    const metadata = consumer.currentMetadata;
    if (metadata === undefined) {
      this.#limited('a metadata refresh', consumer.metadata({ topics: this.#topics }))
        .catch(() => {
          this.#failed = true;
        })
        .finally(() => this.#wake?.());
      return;
    }
    const byLeader = new Map<number, PartitionState[]>();
    let leaderless = false;
    for (const state of ready) {
      const leader = metadata.topics.get(state.topic)?.partitions[state.partition]?.leader;
      if (leader === undefined || leader < 0) leaderless = true;
      if (leader === undefined || leader < 0 || this.#fetching.has(leader)) continue;
      appendTo(byLeader, leader, state);
    }
    if (leaderless) {
      // A leader the metadata does not know (moved, or a topic never asked for): ask again after the backoff.
      this.#failed = true;
      consumer.clearMetadata();
    }
    for (const [leader, states] of byLeader) {
      this.#fetching.add(leader);
      for (const listener of this.#fetchListeners) listener();
      this.#fetch(consumer, metadata, generation, leader, states)
        .then(succeeded, (error: unknown) => {
          if (!signal.aborted) this.#fetchFailed(error, states);
        })
        .finally(() => {
          this.#fetching.delete(leader);
          this.#wake?.();
        });
    }
  }

  #limited<T>(step: string, work: Promise<T>): Promise<T> {
    return this.context.limited(step, work, (message, fields) => this.warn(message, fields));
  }

  #fetchFailed(error: unknown, states: readonly PartitionState[]): void {
    this.#failed = true;
    this.#consumer?.clearMetadata();
    if (isOffsetOutOfRange(error)) {
      // Which partition is not said in a way worth parsing: read them all again.
      for (const state of states) state.position = undefined;
      this.warn('a fetch asked for an offset out of range; reading the positions again', { err: error });
      return;
    }
    if (!isBrokerUnreachable(error)) this.warn('fetch failed; retrying', { err: error });
  }

  async #fetch(
    consumer: LibraryConsumer,
    metadata: ClusterMetadata,
    generation: Generation,
    leader: number,
    states: readonly PartitionState[],
  ): Promise<void> {
    const byTopic = new Map<string, PartitionState[]>();
    for (const state of states) appendTo(byTopic, state.topic, state);
    const asked = new Map(states.map((s) => [key(s.topic, s.partition), s.position as bigint]));
    this.#fetcher ??= new RawFetcher(this.context, consumer);
    const fetcher = this.#fetcher;
    const responses = await Promise.all(
      [...byTopic].map(async ([topic, partitions]) => {
        const request = partitions.map((s) => ({ partition: s.partition, offset: s.position as bigint }));
        return { topic, response: await fetcher.fetch(metadata, leader, topic, request, this.#limits) };
      }),
    );
    for (const { topic, response } of responses) {
      for (const p of response.responses.flatMap((r) => r.partitions)) {
        const k = key(topic, p.partitionIndex);
        const state = generation.partitions.get(k);
        const from = asked.get(k);
        // A rebalance, a pause or a failure since the fetch was sent: these records are not wanted now.
        if (state === undefined || this.#generation !== generation || generation.lost) continue;
        if (state.busy || state.paused) continue;
        if (from === undefined || state.position !== from || !p.records || p.records.length === 0) continue;
        // Every fetched batch is read, aborted ones included: the position moves past them all.
        const last = p.records[p.records.length - 1] as RecordsBatch;
        const lastOffset = last.firstOffset + BigInt(last.lastOffsetDelta);
        if (lastOffset < from) continue;
        const messages = consumedMessages(dropAborted(p.records, p.abortedTransactions), from);
        const stable = p.lastStableOffset >= 0n ? p.lastStableOffset : p.highWatermark;
        if (messages.length === 0) {
          // Only transaction markers (or aborted records): step over them.
          state.position = lastOffset + 1n;
          continue;
        }
        this.#handle(generation, state, messages, lastOffset, String(stable));
      }
    }
  }

  #handle(
    generation: Generation,
    state: PartitionState,
    messages: ConsumedBatch['messages'],
    lastOffset: bigint,
    highWatermark: string,
  ): void {
    const run = this.#run;
    const consumer = this.#consumer;
    if (run === undefined || consumer === undefined) return;
    state.busy = true;
    const { topic, partition } = state;
    let resolved: bigint | undefined;
    const stale = () => this.#generation !== generation || generation.lost || !this.#running;
    const batch: ConsumedBatch = {
      topic,
      partition,
      messages,
      highWatermark,
      lastOffset: () => String(lastOffset),
      heartbeat: async () => {
        // The library notices a lost membership only at its next heartbeat: a member resumed after a pause (SIGSTOP,
        // GC) would go on with a batch another member took over. As kafkajs, ask the coordinator.
        if (!stale()) await this.#confirmMembership(generation);
        if (stale()) throw new GroupRebalancingError(`group ${this.groupId} is rebalancing`);
      },
      commit: async (nextOffset: string) => {
        if (!this.owns(topic, partition)) {
          throw new Error(`group ${this.groupId}: partition ${partition} was revoked; commit not sent`);
        }
        await consumer.commit({
          offsets: [{ topic, partition, offset: BigInt(nextOffset), leaderEpoch: -1 }],
        });
      },
      resolveOffset: (offset: string) => {
        resolved = BigInt(offset);
      },
      isRunning: () => this.#running,
      isStale: stale,
    };
    const handler = this.#queue(() => run.eachBatch(batch)).then(
      () => {
        if (this.#generation !== generation) return;
        // As kafkajs without auto-resolve: the next fetch starts after the last resolved record (past the
        // batch's trailing markers once its last record is resolved); nothing resolved reads the commit again.
        const lastMessage = BigInt(messages[messages.length - 1]?.offset ?? '-1');
        if (resolved === undefined) state.position = undefined;
        else state.position = resolved >= lastMessage ? lastOffset + 1n : resolved + 1n;
      },
      (error: unknown) => {
        if (this.#running)
          this.warn('a batch failed; its partition is read again from the commit', { err: error });
        state.position = undefined;
      },
    );
    const tracked = handler.finally(() => {
      state.busy = false;
      // The state object of a newer generation (same partition) was created busy: free it too.
      const current = this.#generation?.partitions.get(key(topic, partition));
      if (current) current.busy = false;
      this.#handlers.delete(tracked);
      this.#wake?.();
    });
    this.#handlers.add(tracked);
  }

  /** When this member sent its last heartbeat the coordinator accepted. */
  #confirmedAt = Number.NEGATIVE_INFINITY;
  /** The heartbeat in flight, for its generation (batches of one generation share it). */
  #confirming: { readonly generation: Generation; readonly done: Promise<void> } | undefined;

  /**
   * A Heartbeat of `generation` unless one was confirmed within the heartbeat interval; rejects when it is refused
   * or cannot be sent. Its send time counts, so an answer that waited in the socket through a pause confirms nothing.
   */
  #confirmMembership(generation: Generation): Promise<void> {
    const interval = this.options.heartbeatIntervalMs ?? 3_000;
    if (performance.now() - this.#confirmedAt < interval) return Promise.resolve();
    if (this.#confirming?.generation === generation) return this.#confirming.done;
    const done = (async () => {
      const sent = performance.now();
      const consumer = this.#need();
      const connection = await this.#coordinator(consumer, []);
      try {
        await send(consumer, 'Heartbeat', connection, this.groupId, generation.id, generation.memberId, null);
      } catch (error) {
        // Expelled or a rebalance: the generation is over (the library rejoins); else only this batch stops.
        const rejoin = findBy(error, 'needsRejoin', true);
        if (rejoin) generation.lost = true;
        const detailed = withBrokerDetail(error);
        const message =
          `group ${this.groupId}: generation ${generation.id} of member ${generation.memberId} is over ` +
          `(${(detailed as Error).message})`;
        throw rejoin
          ? new GroupRebalancingError(message, { cause: detailed })
          : new Error(message, { cause: detailed });
      }
      if (this.#generation === generation) this.#confirmedAt = Math.max(this.#confirmedAt, sent);
    })().finally(() => {
      if (this.#confirming?.done === done) this.#confirming = undefined;
    });
    this.#confirming = { generation, done };
    return done;
  }

  /** A connection to the group's coordinator (metadata of `topics` is read on the way). */
  async #coordinator(consumer: LibraryConsumer, topics: readonly string[]): Promise<Connection> {
    const coordinator = await consumer.findGroupCoordinator();
    const metadata = await consumer.metadata({ topics: [...topics] });
    const broker = metadata.brokers.get(coordinator);
    if (broker === undefined) throw new Error(`group coordinator ${coordinator} is not in the metadata`);
    return connectionTo(consumer, broker);
  }

  /** Runs `task` once fewer than `partitionsConsumedConcurrently` handlers run. */
  readonly #waiting: (() => void)[] = [];
  #active = 0;
  async #queue(task: () => Promise<void>): Promise<void> {
    const limit = Math.max(1, this.#run?.partitionsConsumedConcurrently ?? 1);
    if (this.#active >= limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    this.#active++;
    try {
      await task();
    } finally {
      this.#active--;
      this.#waiting.shift()?.();
    }
  }

  /** Reads the committed offsets of `states`, else the reset offset (the log's ends: list-offsets.ts). */
  async #refreshPositions(
    consumer: LibraryConsumer,
    generation: Generation,
    states: readonly PartitionState[],
    refresh: number,
  ): Promise<void> {
    const byTopic = new Map<string, number[]>();
    for (const s of states) appendTo(byTopic, s.topic, s.partition);
    const committed = await this.#committedOffsets(consumer, byTopic);
    const ends = (timestamp: bigint) =>
      listOffsets(consumer, {
        partitions: byTopic,
        timestamp,
        isolationLevel: FetchIsolationLevels.READ_COMMITTED,
        retries: this.context.retries,
      });
    const earliest = await ends(ListOffsetTimestamps.EARLIEST);
    const reset = this.#fromBeginning ? earliest : await ends(ListOffsetTimestamps.LATEST);
    if (refresh !== this.#refreshes) return;
    for (const s of states) {
      if (this.#generation !== generation || s.busy) continue;
      const offset = committed.get(key(s.topic, s.partition)) ?? -1n;
      const low = earliest.get(s.topic)?.get(s.partition) ?? 0n;
      // A commit older than the log start (records deleted by retention) reads from the start.
      s.position =
        offset >= 0n ? (offset < low ? low : offset) : (reset.get(s.topic)?.get(s.partition) ?? 0n);
    }
  }

  /** The commits by OffsetFetch: the library's `listCommittedOffsets` cannot ask {@link REQUIRE_STABLE}. */
  async #committedOffsets(
    consumer: LibraryConsumer,
    byTopic: Map<string, number[]>,
  ): Promise<Map<string, bigint>> {
    const connection = await this.#coordinator(consumer, [...byTopic.keys()]);
    const topics = [...byTopic].map(([name, partitionIndexes]) => ({ name, partitionIndexes }));
    const groups = [{ groupId: this.groupId, memberId: null, memberEpoch: -1, topics }];
    const response = await retrying(
      () => send<OffsetFetchResponse>(consumer, 'OffsetFetch', connection, groups, this.#requireStable),
      (error, failures) =>
        findBy(error, 'apiId', 'UNSTABLE_OFFSET_COMMIT') && failures <= 100 && !this.#abort.signal.aborted
          ? 200
          : undefined,
    );
    const result = new Map<string, bigint>();
    for (const topic of response.groups.flatMap((g) => g.topics)) {
      for (const p of topic.partitions) result.set(key(topic.name, p.partitionIndex), p.committedOffset);
    }
    return result;
  }
}
