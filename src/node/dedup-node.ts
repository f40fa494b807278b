import { type Consumer, type EachBatchPayload, type Kafka, type KafkaMessage, Partitioners } from 'kafkajs';
import type { Logger } from 'pino';
import { checkChangelogTopic, ensureChangelogTopic } from '../kafka/changelog/index.js';
import type { IdempotentRepository } from '../repositories/types.js';
import { untilAborted } from './abort.js';
import { CatchUp } from './catch-up.js';
import { type ChunkDeps, ChunkProcessor, emptyTotals, type NodeTotals } from './chunk.js';
import { kafkaClient } from './kafka-client.js';
import { NodeMetrics } from './metrics.js';
import { changelogEnabled, changelogTopic, type NodeConfig } from './options.js';
import { isFenced, OutputWriter } from './output.js';
import { PartitionLifecycle, type PartitionState } from './partition-state.js';
import { formatPerf, PerfLog } from './perf-log.js';
import { prepareTopics } from './topics.js';

/** What a running node exposes. */
export interface DedupNodeHandle {
  readonly metrics: NodeMetrics;
  /** The port `/metrics` is served on, when enabled. */
  readonly metricsPort: number | undefined;
  /** Rejects when the node fails for good: the consumer crashed and kafkajs will not restart it. */
  readonly failed: Promise<never>;
  /** Running counts since start. */
  totals(): Readonly<NodeTotals>;
  /** Finishes the batch in hand, commits it, flushes the store and disconnects. Idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startDedupNode} that exist only in code. */
export interface DedupNodeOptions {
  /** A kafkajs client to use instead of one built from `config.kafka`. */
  readonly kafka?: Kafka;
  /**
   * Gives up the start: the connection attempts in progress are dropped and the start rejects with the
   * signal's reason. kafkajs retries a first connection for minutes; a stop requested meanwhile must not wait.
   */
  readonly signal?: AbortSignal;
}

/**
 * The Kafka→Kafka dedup node. Each partition batch is cut into chunks of `input.batchSize` records; per chunk:
 *   1. parse: read each record's dedup id (unreadable records and, by default, records without one are set
 *      aside for the DLQ);
 *   2. lookup: one store call for the chunk's ids; a duplicate of a stored id or of an earlier record in the
 *      chunk is dropped (first received wins);
 *   3. produce + deliver: write the survivors to the output topic, in their input partition with their key,
 *      headers and timestamp, in order, and wait for the acks (records the output refuses go to the DLQ);
 *   4. mark: one store call records the forwarded ids, kept for `dedup.window`;
 *   5. dead letters, then the chunk's offset is resolved.
 * The offsets of the finished chunks are committed once per fetched batch (and before giving up on one).
 * A crash repeats at most the chunk between its produce and its mark; nothing is committed before it is
 * written somewhere. Partitions are handled one at a time, so one process never races itself. See docs/node.md.
 * Under `output.guarantee = "exactly-once"` each chunk is one Kafka transaction (output, changelog marks, dead
 * letters, input offset) and the marks reach the local store only after it commits; a newly assigned partition
 * first restores its marks from the changelog (partition-state.ts).
 */
export async function startDedupNode(
  config: NodeConfig,
  repository: IdempotentRepository,
  logger: Logger,
  options: DedupNodeOptions = {},
): Promise<DedupNodeHandle> {
  const kafka = options.kafka ?? kafkaClient(config.kafka, logger);
  const { signal } = options;
  signal?.throwIfAborted();
  const layout = await prepareTopics(kafka, config, signal);
  const exactlyOnce = config.output.guarantee === 'exactly-once';
  const changelog = changelogEnabled(config) ? changelogTopic(config) : undefined;
  if (changelog !== undefined) {
    // Created with the input's partition count (changelog partition p holds input partition p's marks), or checked.
    const admin = kafka.admin();
    const spec = {
      topic: changelog,
      partitions: layout.inputPartitions,
      retentionMs: config.dedup.window,
      configKey: 'changelog.topic',
    };
    try {
      await untilAborted(
        // Checked when it exists: asking kafkajs to create an existing topic logs an error line.
        admin
          .connect()
          .then(() => admin.listTopics())
          .then(async (topics) => {
            if (topics.includes(changelog)) await checkChangelogTopic(admin, spec);
            else await ensureChangelogTopic(admin, spec);
          }),
        signal,
      );
    } finally {
      await admin.disconnect();
    }
  }
  const metrics = new NodeMetrics();
  const perf = new PerfLog();
  const totals = emptyTotals();
  const { batchSize } = config.input;

  const producer = kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    // Output records carry their partition; only dead letters are placed, by key.
    createPartitioner: Partitioners.DefaultPartitioner,
  });
  const output = new OutputWriter(producer, {
    topic: config.output.topic,
    maxBatchBytes: layout.outputMaxBatchBytes,
    sendAttempts: config.output.sendAttempts,
    retryBackoffMs: config.output.retryBackoff,
    onRetry: (error, attempt) => {
      metrics.outputRetries.inc();
      logger.warn({ err: error, attempt }, 'output request failed; retrying');
    },
  });
  const consumer: Consumer = kafka.consumer({
    groupId: config.input.groupId,
    sessionTimeout: config.kafka.sessionTimeout,
    heartbeatInterval: Math.max(500, Math.floor(config.kafka.sessionTimeout / 5)),
    maxWaitTimeInMs: config.input.batchTimeout,
    maxBytesPerPartition: config.input.maxBytesPerPartition,
    maxBytes: config.input.maxBytes,
    allowAutoTopicCreation: false,
  });

  let fail: (error: Error) => void = () => undefined;
  const failed = new Promise<never>((_, reject) => {
    fail = reject;
  });
  failed.catch(() => undefined); // observed by whoever awaits it; never an unhandled rejection
  // Set once the consumer runs; the node starts it again after a crash kafkajs gives up on for lack of a broker.
  let runConsumer: (() => Promise<void>) | undefined;
  let restartTimer: NodeJS.Timeout | undefined;
  let restarts = 0;
  let stopRequested = false;
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    if (payload.restart) {
      logger.warn({ err: payload.error }, 'consumer crashed; kafkajs restarts it');
    } else if (runConsumer && !stopRequested && brokerUnreachable(payload.error) && restarts < MAX_RESTARTS) {
      // kafkajs treats "no broker answered the coordinator lookup" as final, although a broker restart (or a
      // leader moving) causes it: a single-broker cluster that restarts would otherwise end the process.
      const delay = Math.min(RESTART_MAX_MS, RESTART_FIRST_MS * 2 ** restarts++);
      logger.warn(
        { err: payload.error, attempt: restarts, delayMs: delay },
        'consumer crashed for lack of a broker; the node starts it again',
      );
      const run = runConsumer;
      restartTimer = setTimeout(() => {
        restartTimer = undefined;
        if (!stopRequested) run().catch((error: unknown) => fail(asError(error)));
      }, delay);
    } else {
      logger.error({ err: payload.error }, 'consumer crashed and will not restart');
      fail(payload.error);
    }
  });
  // An iteration is one fetch round; a round that brought no records was input-starved.
  let roundHadRecords = true;
  consumer.on(consumer.events.FETCH_START, () => {
    perf.iteration(!roundHadRecords);
    roundHadRecords = false;
  });
  let partitions: PartitionLifecycle | undefined;
  const catchUp = new CatchUp(config.catchUp, batchSize, metrics.registry, logger);
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    restarts = 0;
    catchUp.reassigned();
    logger.info({ memberId: payload.memberId, assignment: payload.memberAssignment }, 'joined the group');
    partitions?.assigned(payload.memberAssignment[config.input.topic] ?? []).catch((error: unknown) => {
      logger.warn({ err: error }, 'closing revoked partitions failed');
    });
  });

  const stopStarting = async () => {
    await Promise.allSettled([consumer.disconnect(), producer.disconnect()]);
  };
  const starting = async () => {
    await producer.connect();
    await consumer.connect();
    await consumer.subscribe({ topic: config.input.topic, fromBeginning: config.input.fromBeginning });
  };
  try {
    await untilAborted(starting(), signal);
  } catch (error) {
    // Drop the clients' connection attempts; their own retries end with the disconnect.
    await stopStarting();
    throw error;
  }

  let metricsPort: number | undefined;
  if (config.metrics.enabled) metricsPort = await metrics.listen(config.metrics.port, config.metrics.host);
  const perfTimer = setInterval(() => {
    const summary = perf.flush();
    logger.info({ perf: summary }, formatPerf(summary));
    catchUp.logProgress(logger);
  }, config.perf.interval);
  perfTimer.unref();

  const chunkDeps: ChunkDeps = {
    config,
    repository,
    output,
    producer,
    metrics,
    perf,
    totals,
    logger,
  };
  // Without a changelog, one processor over the store; with one, each partition has its own processor over its
  // logged view of the store (partition-state.ts), so every write reaches the partition's changelog.
  const chunks = new ChunkProcessor(chunkDeps);
  if (changelog !== undefined) {
    partitions = new PartitionLifecycle({
      config,
      kafka,
      repository,
      metrics,
      logger,
      producer,
      changelogTopic: changelog,
      checkpointPath: checkpointPath(config),
      chunkProcessor: (overrides) => new ChunkProcessor({ ...chunkDeps, ...overrides }),
    });
  }

  /**
   * One fetched partition batch, chunk by chunk: each chunk is parsed, looked up, produced (acked) and marked
   * before the next one starts, so at most one chunk is ever produced but not yet marked: a crash repeats at
   * most that chunk. The offsets of the finished chunks are committed at the end, also when a chunk failed.
   * (Overlapping a chunk's lookup with the previous chunk's produce measured no faster: the node is bound by
   * its one CPU thread, not by waiting.)
   */
  const handleBatch = async (payload: EachBatchPayload): Promise<void> => {
    const batchStart = performance.now();
    perf.enter();
    roundHadRecords = true;
    const { topic, partition, messages } = payload.batch;
    const highWatermark = Number(payload.batch.highWatermark);
    const partitionLabel = String(partition);
    let done: KafkaMessage | undefined;
    let failure: unknown;
    try {
      // A newly assigned partition first gets its dedup state back from the changelog.
      const state = partitions && (await partitions.ready(partition, payload.heartbeat));
      for (let i = 0; i < messages.length; ) {
        if (!payload.isRunning() || payload.isStale()) break;
        // Larger chunks while the partition catches up (src/node/catch-up.ts).
        const size = catchUp.chunkSize(topic, partition, Number(messages[i]?.offset), highWatermark);
        const chunk = messages.slice(i, i + size);
        i += chunk.length;
        if (state?.producer) {
          if (!(await handleTransactional(state, topic, chunk, payload))) break;
        } else if (state) {
          await state.chunks.handle(topic, partition, chunk);
          partitions?.advanced(partition, state.sink?.next);
        } else {
          await chunks.handle(topic, partition, chunk);
        }
        done = chunk[chunk.length - 1] as KafkaMessage;
        payload.resolveOffset(done.offset);
        catchUp.handled(topic, partition, chunk.length, Number(done.offset) + 1, highWatermark);
        // Behind the high watermark of this fetch; Number is exact below 2^53 records.
        metrics.lag.set(
          { topic, partition: partitionLabel },
          Math.max(0, highWatermark - Number(done.offset) - 1),
        );
        await payload.heartbeat();
      }
    } catch (error) {
      failure = error;
    }
    // Commit what is finished even when a later chunk failed, so a retry or a new owner repeats less.
    // (Exactly-once: each chunk's transaction committed its offset.)
    if (done !== undefined && !exactlyOnce) {
      const commitStart = performance.now();
      try {
        await payload.commitOffsetsIfNecessary({
          topics: [{ topic, partitions: [{ partition, offset: nextOffset(done.offset) }] }],
        });
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
        'batch failed; kafkajs retries it from the last commit',
      );
      throw failure;
    }
  };

  /**
   * One exactly-once chunk in its transaction. False when the partition was fenced: a newer owner holds its
   * transactional id, so this instance drops the partition's work (nothing marked, nothing committed) and pauses
   * it until the group has had time to move it; if the group gives it back, it is restored again first.
   */
  const handleTransactional = async (
    state: PartitionState,
    topic: string,
    chunk: KafkaMessage[],
    payload: EachBatchPayload,
  ): Promise<boolean> => {
    const lifecycle = partitions as PartitionLifecycle;
    const tx = lifecycle.transaction(state);
    try {
      await state.chunks.handle(topic, state.partition, chunk, tx);
    } catch (error) {
      if (tx.committed) {
        // Committed, but the local store missed the marks: restore before the next record.
        metrics.transactions.inc({ result: 'committed' });
        await lifecycle.reset(state.partition, 'committed marks not applied locally');
        throw error;
      }
      if (isFenced(error)) {
        metrics.transactions.inc({ result: 'fenced' });
        logger.warn(
          { err: error, topic, partition: state.partition },
          'partition fenced by a newer owner: its work is dropped',
        );
        await lifecycle.reset(state.partition, 'fenced');
        pauseFenced(topic, state.partition);
        payload.heartbeat().catch(() => undefined);
        return false;
      }
      metrics.transactions.inc({ result: 'aborted' });
      // A transaction whose end failed leaves its producer unusable and its outcome unknown: a new producer (its
      // init aborts what is open) and a restore (the changelog holds the marks if it did commit) before going on.
      if (tx.needsNewProducer)
        await lifecycle.reset(state.partition, 'transaction did not end in a known abort');
      throw error;
    }
    metrics.transactions.inc({ result: 'committed' });
    lifecycle.advanced(state.partition, tx.committed?.changelogNext);
    return true;
  };
  /** Pauses a fenced partition for one session timeout: long enough for the group to move it if it must. */
  const pauseFenced = (topic: string, partition: number) => {
    consumer.pause([{ topic, partitions: [partition] }]);
    setTimeout(
      () => consumer.resume([{ topic, partitions: [partition] }]),
      config.kafka.sessionTimeout,
    ).unref();
  };

  runConsumer = () =>
    consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1,
      eachBatch: handleBatch,
    });
  await runConsumer();

  let stopping: Promise<void> | undefined;
  return {
    metrics,
    metricsPort,
    failed,
    totals: () => ({ ...totals }),
    stop: () => {
      stopping ??= (async () => {
        stopRequested = true;
        clearTimeout(restartTimer);
        clearInterval(perfTimer);
        try {
          await consumer.disconnect(); // waits for the chunk in hand; the batch commits before returning
          await partitions?.close(); // transactional producers, checkpoints
          await producer.disconnect();
        } finally {
          await repository.close(); // flushes a local store
          await metrics.close();
          const summary = perf.flush();
          logger.info({ perf: summary }, formatPerf(summary));
        }
      })();
      return stopping;
    },
  };
}

/**
 * The changelog checkpoint file: configured, or beside a RocksDB store (a local store that survives a
 * restart). Other stores get none unless configured: a checkpoint must never claim marks the store lost.
 */
function checkpointPath(config: NodeConfig): string | undefined {
  if (config.changelog.checkpoint !== undefined) return config.changelog.checkpoint;
  const repository = config.repository as { type?: string; path?: string };
  return repository.type === 'rocksdb' && repository.path ? `${repository.path}.changelog.json` : undefined;
}

/** Restarts of a consumer that crashed for lack of a broker, in a row (a join resets the count): ~5 minutes. */
const MAX_RESTARTS = 12;
const RESTART_FIRST_MS = 1_000;
const RESTART_MAX_MS = 30_000;

/**
 * Errors kafkajs does not retry although they only say that no broker could be reached: the group coordinator
 * lookup found no broker answering (kafkajs bails out of it at once when every connection is refused).
 */
function brokerUnreachable(error: Error): boolean {
  for (let e: unknown = error; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    if (e.name === 'KafkaJSGroupCoordinatorNotFound' || e.name === 'KafkaJSConnectionError') return true;
    if (e.name === 'KafkaJSBrokerNotFound') return true;
  }
  return false;
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

function nextOffset(offset: string): string {
  return (BigInt(offset) + 1n).toString();
}
