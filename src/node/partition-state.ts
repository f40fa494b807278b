import {
  ChangelogCheckpoint,
  ChangelogReader,
  KafkaChangelogSink,
  KafkaChangelogSource,
} from '../kafka/changelog/index.js';
import type { GroupMetadata, KafkaProducer } from '../kafka/port/index.js';
import { ChangelogRestorer, LoggedRepository } from '../repositories/logged/index.js';
import type { ChunkDeps, ChunkProcessor, NodeRuntime } from './chunk.js';
import type { transactionalProducers } from './exactly-once/producers.js';
import { ChunkTransaction, TransactionOnlySink } from './exactly-once/transaction.js';

/** One assigned input partition: its chunk processor writes through `store` to changelog partition = input partition. */
export interface PartitionState {
  readonly partition: number;
  readonly store: LoggedRepository;
  readonly chunks: ChunkProcessor;
  /** At-least-once: the changelog sink (its `next` offset is what the local store holds). */
  readonly sink?: KafkaChangelogSink;
  /** Exactly-once, per-partition: the partition's own transactional producer (per-instance: the lifecycle's). */
  readonly producer?: KafkaProducer;
}

export interface PartitionLifecycleDeps
  extends Pick<NodeRuntime, 'kafka' | 'consumer' | 'repository' | 'metrics' | 'logger' | 'producer'> {
  readonly inputTopic: string;
  readonly outputTopic: string;
  readonly dlqTopic: string;
  /** `perf.interval`: how often a long restore logs its progress. */
  readonly progressIntervalMs: number;
  readonly changelogTopic: string;
  /** The checkpoint file; undefined: every restore reads the changelog from the start. */
  readonly checkpointPath: string | undefined;
  /** Exactly-once: its transactional producers; undefined under at-least-once. */
  readonly transactions: TransactionalProducers | undefined;
  readonly chunkProcessor: (overrides: Partial<ChunkDeps>) => ChunkProcessor;
}

/** Exactly-once: one transactional producer per partition, or one for the instance (`output.transactionalProducer`). */
export type TransactionalProducers = ReturnType<typeof transactionalProducers>;

/**
 * The partitions this instance owns and their state; one no longer assigned is closed. `ready` restores one
 * before its first record: an exactly-once producer's init fences the previous owner (the changelog's end is
 * then stable), then the changelog is read from the checkpoint up to that end.
 */
export class PartitionLifecycle {
  readonly #deps: PartitionLifecycleDeps;
  /** Exactly-once with one producer for the instance, fenced by the group (KIP-447): its transactional id. */
  readonly #instanceId: string | undefined;
  #instanceProducer: KafkaProducer | undefined;
  readonly #reader: ChangelogReader;
  readonly #restorer: ChangelogRestorer;
  readonly #ready = new Map<number, PartitionState>();
  /** The group's current assignment of the input topic. */
  #assigned = new Set<number>();
  /** Counts the joins: a batch begun before the latest one must not go on ({@link current}). */
  #epoch = 0;
  /** The generation this member last joined (a gap in it means partitions may have moved). */
  #lastJoin: GroupJoin | undefined;

  constructor(deps: PartitionLifecycleDeps) {
    this.#deps = deps;
    this.#instanceId = deps.transactions?.instanceId;
    this.#reader = new ChangelogReader(deps.kafka);
    this.#restorer = new ChangelogRestorer({
      source: new KafkaChangelogSource({ reader: this.#reader, topic: deps.changelogTopic }),
      // A file that cannot be read fails the first restore, naming it.
      ...(deps.checkpointPath === undefined
        ? {}
        : { checkpoints: ChangelogCheckpoint.load(deps.checkpointPath, deps.changelogTopic) }),
      // A checkpoint that cannot be written only makes the next restore longer.
      onCheckpointError: (error, partition) => {
        deps.logger.warn({ err: error, partition }, 'could not write the changelog checkpoint');
      },
    });
  }

  /**
   * Per-instance: connects the instance's producer before the consumer joins. Its init aborts what this instance's
   * previous run left open, which would otherwise hold its offsets and output until the transaction timeout.
   */
  async start(): Promise<void> {
    if (this.#instanceId !== undefined)
      this.#instanceProducer ??= await this.#transactionalProducer(this.#instanceId);
  }

  /** A connected transactional producer: its init fences the id's previous owner and aborts its open transaction. */
  async #transactionalProducer(transactionalId: string): Promise<KafkaProducer> {
    const { kafka, transactions } = this.#deps;
    const producer = kafka.producer({
      transactionalId,
      transactionTimeoutMs: (transactions as TransactionalProducers).timeoutMs,
      idempotent: true,
    });
    try {
      await producer.connect();
    } catch (error) {
      await producer.disconnect().catch(() => undefined);
      throw error;
    }
    return producer;
  }

  /**
   * A chunk's transaction was fenced. Per-partition (a newer owner has its id): its partition is restored.
   * Per-instance (fenced by the group, or aborted by the broker): all are, the producer replaced.
   */
  async afterFenced(partition: number, cause: unknown): Promise<void> {
    if (!this.perInstance) {
      await this.reset(partition, 'fenced');
      return;
    }
    await this.#closeAll([...this.#ready.keys()], () => 'fenced');
    await this.#replaceInstanceProducer(cause);
  }

  /** A chunk's transaction may have committed: its partition is restored, a per-instance producer replaced. */
  async afterUnknownEnd(partition: number, cause: unknown): Promise<void> {
    await this.reset(partition, 'transaction did not end in a known abort');
    if (this.perInstance) await this.#replaceInstanceProducer(cause);
  }

  /** Per-instance: a new producer, whose init aborts what is still open; if it cannot start, the next chunk's does. */
  async #replaceInstanceProducer(cause: unknown): Promise<void> {
    const old = this.#instanceProducer;
    this.#instanceProducer = undefined;
    await old?.disconnect().catch(() => undefined);
    try {
      await this.start();
    } catch (error) {
      this.#deps.logger.warn(
        { err: error, cause },
        'could not start the instance transactional producer again; the next chunk tries again',
      );
    }
  }

  get perInstance(): boolean {
    return this.#instanceId !== undefined;
  }

  /**
   * The group assigned these partitions: the ones it took away are closed, and after a gap in the generations (every
   * kafkajs rejoin) every one, since a kept one may have been processed elsewhere meanwhile.
   */
  async assigned(partitions: readonly number[], join: GroupJoin): Promise<void> {
    this.#assigned = new Set(partitions);
    this.#epoch++;
    const gap = !followsOn(this.#lastJoin, join);
    this.#lastJoin = join;
    const closing = [...this.#ready.keys()].filter((p) => gap || !this.#assigned.has(p));
    await this.#closeAll(closing, (p) =>
      this.#assigned.has(p) ? 'rejoined the group after a gap' : 'revoked',
    );
  }

  get epoch(): number {
    return this.#epoch;
  }

  /** True while `state` is its partition's ready state and no join happened since `epoch`. */
  current(state: PartitionState, epoch: number): boolean {
    return this.#epoch === epoch && this.#ready.get(state.partition) === state;
  }

  /**
   * The partition's state, restored first if needed (with the other assigned partitions that wait: one changelog
   * read for all). Undefined when the partition is not this member's now, or was reassigned during the restore.
   */
  async ready(partition: number, heartbeat: () => Promise<void>): Promise<PartitionState | undefined> {
    if (!this.#assigned.has(partition)) return undefined;
    const state = this.#ready.get(partition);
    if (state) return state;
    const waiting = [...this.#assigned].filter((p) => !this.#ready.has(p)).sort((a, b) => a - b);
    // Reads all waiting partitions: the one store must know ids a copy in another partition repeats (a kill
    // before a commit's local apply leaves them in the changelog only). Per-instance only this one, read with
    // requireStable, is known stable: another may await another instance's transaction.
    await this.#restore(waiting, heartbeat, this.perInstance ? partition : undefined);
    return this.#ready.get(partition);
  }

  /** The partition must be restored again before its next record. */
  async reset(partition: number, why: string): Promise<void> {
    const state = this.#ready.get(partition);
    this.#ready.delete(partition);
    if (state) await this.#closeState(state, why);
    else await this.#restorer.checkpoint(partition);
  }

  /** Records that a committed chunk's marks reached the changelog up to `next` (and the store holds them). */
  advanced(partition: number, next: number | undefined): void {
    this.#restorer.advanced(partition, next);
  }

  /** At-least-once: the sink's appends; one not following the store's offset (another writer's) restores it. */
  async appended(state: PartitionState): Promise<void> {
    for (const { first, next } of state.sink?.takeWritten() ?? []) {
      if (this.#restorer.advanced(state.partition, next, first)) continue;
      if (this.#ready.get(state.partition) === state) {
        await this.reset(state.partition, 'another instance wrote to its changelog partition meanwhile');
      }
      return;
    }
  }

  /** Closes every partition (graceful stop): producers disconnected, checkpoints written. */
  async close(): Promise<void> {
    for (const partition of [...this.#ready.keys()]) await this.reset(partition, 'stopping');
    const producer = this.#instanceProducer;
    this.#instanceProducer = undefined;
    await producer?.disconnect().catch(() => undefined);
    await this.#reader.close();
  }

  /** Closes these ready partitions; they leave the ready set before anything is awaited, so a restore is never closed. */
  async #closeAll(partitions: readonly number[], why: (partition: number) => string): Promise<void> {
    const states = partitions.flatMap((p) => {
      const state = this.#ready.get(p);
      this.#ready.delete(p);
      return state ? [state] : [];
    });
    for (const state of states) await this.#closeState(state, why(state.partition));
  }

  async #closeState(state: PartitionState, why: string): Promise<void> {
    const { partition } = state;
    if (state.producer) await state.producer.disconnect().catch(() => undefined);
    await state.store.close();
    const applied = await this.#restorer.checkpoint(partition);
    this.#deps.logger.info({ partition, reason: why, changelogOffset: applied }, 'partition closed');
  }

  /** Restores `partitions`; with `only`, only that one becomes ready and the others are closed once read. */
  async #restore(
    partitions: readonly number[],
    heartbeat: () => Promise<void>,
    only?: number,
  ): Promise<void> {
    const start = performance.now();
    // 1. Per-partition exactly-once: the producers are initialised before the end is captured.
    const states = new Map<number, PartitionState>();
    const epoch = this.#epoch;
    try {
      for (const partition of partitions) states.set(partition, await this.#open(partition));
      await this.#read(partitions, states, heartbeat, start);
    } catch (error) {
      // Nothing became ready: a later attempt starts new producers.
      for (const state of states.values()) {
        await state.producer?.disconnect().catch(() => undefined);
        await state.store.close();
      }
      throw error;
    }
    for (const [partition, state] of states) {
      // The group moved partitions during the restore: this one may have had another owner meanwhile.
      if (this.#epoch !== epoch || !this.#assigned.has(partition)) {
        await this.#closeState(state, 'the group rebalanced during its restore');
      } else if (only !== undefined && partition !== only) {
        await state.store.close();
        await this.#restorer.checkpoint(partition);
      } else this.#ready.set(partition, state);
    }
  }

  async #read(
    partitions: readonly number[],
    states: ReadonlyMap<number, PartitionState>,
    heartbeat: () => Promise<void>,
    start: number,
  ): Promise<void> {
    const { metrics, logger, changelogTopic, progressIntervalMs } = this.#deps;
    let ends: ReadonlyMap<number, number> = new Map();
    const lag = (p: number, at: number) => Math.max(0, (ends.get(p) ?? 0) - at);
    let lastLog = performance.now();
    // 2. From the checkpoint up to the ends captured now, after the inits; 3. into the local store; 4. checkpoint.
    const { restored } = await this.#restorer.restore(
      new Map(partitions.map((p) => [p, (states.get(p) as PartitionState).store])),
      {
        onStart: (plan) => {
          ends = plan.ends;
          let total = 0;
          for (const [p, at] of plan.from) {
            metrics.restoreLag.set({ partition: String(p) }, lag(p, at));
            total += lag(p, at);
          }
          logger.info(
            {
              changelog: changelogTopic,
              from: Object.fromEntries(plan.from),
              ends: Object.fromEntries(ends),
            },
            `restoring ${partitions.length} partition(s) from the changelog: ${total} records`,
          );
        },
        onUnreadable: (bad) => {
          metrics.changelogUnreadable.inc();
          logger.warn(bad, `skipping an unreadable changelog record: ${bad.reason}`);
        },
        onProgress: ({ partition, nextOffset, restored }) => {
          metrics.restoreLag.set({ partition: String(partition) }, lag(partition, nextOffset));
          if (performance.now() - lastLog >= progressIntervalMs) {
            lastLog = performance.now();
            const seconds = (lastLog - start) / 1000;
            logger.info(
              { restore: { ids: restored, seconds } },
              `restore progress: ${restored} ids in ${seconds.toFixed(1)}s (${Math.round(restored / seconds)} ids/s)`,
            );
          }
        },
        // A failed heartbeat (a rebalance) must not stop the restore: the marks stay valid.
        heartbeat: () => heartbeat().catch(() => undefined),
      },
    );
    metrics.restoredIds.inc(restored);
    for (const partition of partitions) metrics.restoreLag.set({ partition: String(partition) }, 0);
    const seconds = (performance.now() - start) / 1000;
    metrics.restoreSeconds.observe(seconds);
    logger.info(
      { restore: { partitions, ids: restored, seconds } },
      `restored ${restored} ids for partition(s) ${partitions.join(',')} in ${seconds.toFixed(2)}s` +
        (seconds > 0 ? ` (${Math.round(restored / seconds)} ids/s)` : ''),
    );
  }

  /** A partition's logged store and chunk processor; per-partition exactly-once, its initialised producer. */
  async #open(partition: number): Promise<PartitionState> {
    const { kafka, producer, repository, changelogTopic, transactions } = this.#deps;
    const sink = transactions
      ? undefined
      : new KafkaChangelogSink({ client: kafka, producer, topic: changelogTopic, partition });
    const store = new LoggedRepository(repository, sink ?? new TransactionOnlySink(partition), {
      closeInner: false,
      name: `node partition ${partition}`,
    });
    const chunks = this.#deps.chunkProcessor({ repository: store });
    if (transactions === undefined || this.perInstance) return { partition, store, sink, chunks };
    try {
      const own = await this.#transactionalProducer(transactions.partitionId(partition));
      return { partition, store, producer: own, chunks };
    } catch (error) {
      await store.close();
      throw error;
    }
  }

  transaction(state: PartitionState): ChunkTransaction {
    const producer = state.producer ?? this.#instanceProducer;
    if (this.#deps.transactions === undefined || !producer) {
      throw new TypeError(`partition ${state.partition} is not exactly-once, or its producer is not started`);
    }
    const { partition, store } = state;
    return new ChunkTransaction({ ...this.#deps, producer, group: this.#deps.consumer, partition, store });
  }
}

/** A join of this member: its generation is undefined where the client does not say it (kafkajs). */
type GroupJoin = Pick<GroupMetadata, 'memberId' | 'generationId'>;

/** True when `next` is the generation right after `last`, for the same member (a first join has nothing to lose). */
export function followsOn(last: GroupJoin | undefined, next: GroupJoin): boolean {
  if (last === undefined) return true;
  if (last.generationId === undefined || next.generationId === undefined) return false;
  return next.memberId === last.memberId && next.generationId === last.generationId + 1;
}
