import type { ConsumedBatch, ConsumedMessage, KafkaErrorClassifier } from '../kafka/port/index.js';
import type { CatchUp } from './catch-up.js';
import type { ChunkProcessor, NodeRuntime } from './chunk.js';
import { GenerationMovedError } from './exactly-once/producers.js';
import type { ChunkTransaction } from './exactly-once/transaction.js';
import type { PartitionLifecycle, PartitionState } from './partition-state.js';

export interface BatchLoopDeps
  extends Pick<NodeRuntime, 'consumer' | 'metrics' | 'perf' | 'totals' | 'logger'> {
  /** `output.guarantee = "exactly-once"`: consecutive chunks share a transaction ({@link Span}). */
  readonly exactlyOnce: boolean;
  /** `input.batchSize`, the records of a chunk: a span commits after {@link SPAN_CHUNKS} of them. */
  readonly batchSize: number;
  /** `kafka.sessionTimeout`: a longer step may have lost the partition; a fenced one pauses this long. */
  readonly sessionTimeoutMs: number;
  readonly errors: KafkaErrorClassifier;
  /** Without a changelog: the processor over the store. */
  readonly chunks: ChunkProcessor;
  /** With a changelog: the assigned partitions and their logged stores. */
  readonly partitions: PartitionLifecycle | undefined;
  readonly catchUp: CatchUp;
}

/**
 * The consumer's `eachBatch`: a fetched partition batch, chunk by chunk, each finished before the next starts; the
 * finished chunks' offset is committed at the end, also when a chunk failed. Overlapping a chunk's lookup with the
 * previous one's produce measured no faster: the node is bound by its one CPU thread.
 */
export class BatchLoop {
  readonly #deps: BatchLoopDeps;
  /** An iteration is one fetch round; a round that brought no records was input-starved. */
  #roundHadRecords = true;

  constructor(deps: BatchLoopDeps) {
    this.#deps = deps;
    const { consumer, perf } = deps;
    consumer.onFetchStart(() => {
      perf.iteration(!this.#roundHadRecords);
      this.#roundHadRecords = false;
    });
  }

  /** Runs one fetched batch (the consumer's `eachBatch`); rejects so the client retries it from the last commit. */
  readonly handle = async (payload: ConsumedBatch): Promise<void> => {
    const { metrics, perf, totals, logger } = this.#deps;
    const batchStart = performance.now();
    perf.enter();
    this.#roundHadRecords = true;
    const { topic, partition } = payload;
    // The last record handled so far, also when a chunk fails: its offset is committed.
    const progress: { done?: ConsumedMessage } = {};
    let failure: unknown;
    try {
      await this.#chunks(payload, progress);
    } catch (error) {
      failure = error;
    }
    // Commit what is finished even when a later chunk failed, so a retry or a new owner repeats less.
    const { done } = progress;
    if (done !== undefined && !this.#deps.exactlyOnce) {
      const commitStart = performance.now();
      try {
        await payload.commit((BigInt(done.offset) + 1n).toString());
        totals.commits++;
      } catch (error) {
        failure ??= error;
      }
      perf.add('commit', performance.now() - commitStart);
    }
    totals.batches++;
    metrics.batchSeconds.observe((performance.now() - batchStart) / 1000);
    perf.leave();
    if (failure !== undefined) {
      logger.warn(
        { err: failure, topic, partition },
        'batch failed; the client retries it from the last commit',
      );
      throw failure;
    }
  };

  /** The batch's chunks in order, moving `progress.done`. */
  async #chunks(payload: ConsumedBatch, progress: { done?: ConsumedMessage }): Promise<void> {
    const { partitions, chunks, catchUp, metrics } = this.#deps;
    const { topic, partition, messages } = payload;
    const highWatermark = Number(payload.highWatermark);
    const partitionLabel = String(partition);
    let state: PartitionState | undefined;
    let span: Span | undefined;
    try {
      // A batch of a generation that is gone: its partition may be another member's by now.
      if (payload.isStale()) return;
      const epoch = partitions?.epoch ?? 0;
      let stepStart = performance.now();
      state = partitions && (await partitions.ready(partition, payload.heartbeat));
      if (partitions && state === undefined) {
        this.#deps.logger.info(
          { topic, partition, records: messages.length },
          'a batch of a partition this member does not own now: its records are left to the owner',
        );
        return;
      }
      if (this.#overran(stepStart, topic, partition, 'restore')) return;
      // Still a member? A batch fetched just before the process froze, or before the client noticed that the
      // group moved on, stops here.
      await payload.heartbeat();
      // The batch's generation is gone, or the partition rejoined: an open transaction is aborted, not committed.
      let moved = false;
      for (let i = 0; i < messages.length; ) {
        if (!payload.isRunning()) break;
        moved = payload.isStale();
        // A join since the batch began: whoever owns the partition now reads the records again.
        moved ||= state !== undefined && !partitions?.current(state, epoch);
        if (moved) break;
        stepStart = performance.now();
        const size = catchUp.chunkSize(topic, partition, Number(messages[i]?.offset), highWatermark);
        const chunk = messages.slice(i, i + size);
        i += chunk.length;
        const last = chunk[chunk.length - 1] as ConsumedMessage;
        if (state && this.#deps.exactlyOnce) {
          // Per-instance: a producer replaced after a failure may not have started yet.
          if (!span && partitions?.perInstance) await partitions.start();
          span ??= new Span((partitions as PartitionLifecycle).transaction(state));
          const { tx } = span;
          span.records += chunk.length;
          // The span's last chunk commits it as it finishes.
          tx.hold(i < messages.length && !span.full(SPAN_CHUNKS * this.#deps.batchSize));
          const { chunks: processor } = state;
          const handled = await this.#transactional(state, topic, payload, tx, () =>
            processor.handle(topic, partition, chunk, tx),
          );
          if (!handled) {
            span = undefined;
            break;
          }
          span.last = last;
          if (tx.committed) {
            span = undefined;
            this.#committed(state, tx);
            progress.done = last;
            payload.resolveOffset(last.offset);
          }
        } else {
          await (state?.chunks ?? chunks).handle(topic, partition, chunk);
          if (state) await partitions?.appended(state);
          progress.done = last;
          payload.resolveOffset(last.offset);
        }
        catchUp.handled(topic, partition, chunk.length, Number(last.offset) + 1, highWatermark);
        metrics.lag.set(
          { topic, partition: partitionLabel },
          Math.max(0, highWatermark - Number(last.offset) - 1),
        );
        await payload.heartbeat();
        if (this.#overran(stepStart, topic, partition, 'chunk')) break;
      }
      // Stopped early with chunks in an open transaction: committed (stopping, or a step overran), or aborted when
      // the batch's generation or the partition's state is gone.
      if (span?.last !== undefined) {
        if (moved) await this.#abortSpan(state as PartitionState, span);
        else if (await this.#commitSpan(state as PartitionState, topic, payload, span)) {
          progress.done = span.last;
          payload.resolveOffset(span.last.offset);
        }
      }
    } catch (error) {
      // A failure between chunks (a heartbeat) leaves the span open: it is aborted, its records read again.
      if (state !== undefined && span?.tx.open) await this.#abortSpan(state, span).catch(() => undefined);
      throw error;
    }
  }

  /** True when a step outlasted the session timeout: the process may have been frozen and the partition moved. */
  #overran(start: number, topic: string, partition: number, step: 'restore' | 'chunk'): boolean {
    const ms = performance.now() - start;
    const sessionTimeout = this.#deps.sessionTimeoutMs;
    if (ms <= sessionTimeout) return false;
    this.#deps.logger.info(
      { topic, partition, step, ms: Math.round(ms), sessionTimeout },
      `a ${step} took longer than the session timeout: the batch stops after it (the group may have moved the partition)`,
    );
    return true;
  }

  /** Commits a span's transaction; false when the partition's work was dropped (see {@link #transactional}). */
  async #commitSpan(
    state: PartitionState,
    topic: string,
    payload: ConsumedBatch,
    span: Span,
  ): Promise<boolean> {
    const { tx } = span;
    const committed = await this.#transactional(state, topic, payload, tx, () =>
      tx.commit().catch(async (error: unknown) => {
        await tx.fail();
        throw error;
      }),
    );
    if (committed) this.#committed(state, tx);
    return committed;
  }

  #committed(state: PartitionState, tx: ChunkTransaction): void {
    this.#deps.metrics.transactions.inc({ result: 'committed' });
    (this.#deps.partitions as PartitionLifecycle).advanced(state.partition, tx.committed?.changelogNext);
  }

  /** Aborts a span whose partition moved; a producer left in an unknown state is replaced, as after any failure. */
  async #abortSpan(state: PartitionState, span: Span): Promise<void> {
    this.#deps.metrics.transactions.inc({ result: 'aborted' });
    if (await span.tx.fail()) return;
    const cause = new Error('aborting the transaction of a moved partition failed');
    await (this.#deps.partitions as PartitionLifecycle).afterUnknownEnd(state.partition, cause);
  }

  /** One step of an exactly-once transaction; false when a rebalance or a fence dropped the partition's work. */
  async #transactional(
    state: PartitionState,
    topic: string,
    payload: ConsumedBatch,
    tx: ChunkTransaction,
    step: () => Promise<void>,
  ): Promise<boolean> {
    const { metrics, logger } = this.#deps;
    const lifecycle = this.#deps.partitions as PartitionLifecycle;
    try {
      await step();
    } catch (error) {
      if (tx.committed) {
        // Committed, but the local store missed the marks: restore before the next record.
        metrics.transactions.inc({ result: 'committed' });
        await lifecycle.reset(state.partition, 'committed marks not applied locally');
        throw error;
      }
      if (error instanceof GenerationMovedError) {
        // A rebalance, not a zombie: the join tells the lifecycle which partitions may have moved.
        metrics.transactions.inc({ result: 'aborted' });
        logger.info(
          { topic, partition: state.partition, reason: error.message },
          'the group rebalanced during a chunk: its transaction is aborted, the records are read again',
        );
        if (tx.needsNewProducer) await lifecycle.afterUnknownEnd(state.partition, error);
        return false;
      }
      if (this.#deps.errors.isFenced(error)) {
        metrics.transactions.inc({ result: 'fenced' });
        logger.warn(
          { err: error, topic, partition: state.partition },
          'partition fenced by a newer owner: its work is dropped',
        );
        await lifecycle.afterFenced(state.partition, error);
        // Paused for one session timeout: long enough for the group to move it if it must.
        const { consumer, sessionTimeoutMs } = this.#deps;
        const fenced = [{ topic, partitions: [state.partition] }];
        consumer.pause(fenced);
        setTimeout(() => consumer.resume(fenced), sessionTimeoutMs).unref();
        payload.heartbeat().catch(() => undefined);
        return false;
      }
      metrics.transactions.inc({ result: 'aborted' });
      // An end that failed leaves the producer unusable and the outcome unknown: a new producer and a restore.
      if (tx.needsNewProducer) await lifecycle.afterUnknownEnd(state.partition, error);
      throw error;
    }
    return true;
  }
}

/**
 * Exactly-once: one transaction over consecutive chunks, committed when full (records or SPAN_MS), at the batch's
 * end, or when it stops early; a crash repeats it. A transaction per chunk spent most time in commit round trips.
 */
class Span {
  records = 0;
  last: ConsumedMessage | undefined;
  readonly #openedAt = performance.now();
  constructor(readonly tx: ChunkTransaction) {}

  full(records: number): boolean {
    return this.records >= records || performance.now() - this.#openedAt >= SPAN_MS;
  }
}

/** An exactly-once span's longest time open, and most records in `input.batchSize` chunks. */
const SPAN_MS = 100;
const SPAN_CHUNKS = 10;
