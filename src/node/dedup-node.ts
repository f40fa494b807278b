import type { Logger } from 'pino';
import { ConfigError, StartupTimeoutError } from '../errors.js';
import type { KafkaConnection } from '../kafka/connection.js';
import { type KafkaClient, type KafkaLogEntry, openKafkaClient } from '../kafka/port/index.js';
import { durationRule, isValidDuration, maxDurationMs } from '../store/ttl.js';
import type { IdempotentRepository } from '../store/types.js';
import { formatDuration } from '../util/duration.js';
import { givenName } from '../util/renamed-key.js';
import { untilAborted } from './abort.js';
import { BatchLoop } from './batch-loop.js';
import { CatchUp } from './catch-up.js';
import { type ChunkDeps, ChunkProcessor, emptyTotals, type NodeRuntime, type NodeTotals } from './chunk.js';
import { DuplicateAudit } from './duplicates.js';
import { transactionalProducers } from './exactly-once/producers.js';
import { NodeMetrics } from './metrics.js';
import { localFiles, type NodeConfig, nodeTopics } from './options.js';
import { OutputWriter } from './output.js';
import { PartitionLifecycle } from './partition-state.js';
import { formatPerf, PerfLog } from './perf-log.js';
import { ConsumerSupervisor } from './supervisor.js';
import { prepareTopics } from './topics.js';

/** `dedup.ttl` against the store's own maximum TTL (the schema knows only the rule's 100 years). */
function checkTtl(config: Pick<NodeConfig, 'dedup' | 'repository'>, repository: IdempotentRepository): void {
  const max = maxDurationMs(repository.capabilities?.maxTtlMs);
  if (isValidDuration(config.dedup.ttl, max)) return;
  throw new ConfigError(
    `dedup.${givenName(config.dedup, 'ttl')}`,
    `${durationRule(max)} (the maximum of the ${config.repository.type} store), got ${config.dedup.ttl}`,
  );
}

export interface DedupNodeHandle {
  readonly metrics: NodeMetrics;
  /** The port `/metrics` is served on, when enabled. */
  readonly metricsPort: number | undefined;
  /** Rejects when the node fails for good: the consumer crashed and neither the client nor the node restarts it. */
  readonly failed: Promise<never>;
  totals(): Readonly<NodeTotals>;
  /** Finishes the batch in hand, commits it, flushes the store and disconnects. Idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startDedupNode} that exist only in code. */
export interface DedupNodeOptions {
  /** A Kafka client (the port's) to use instead of the one `config.kafka` opens; the node does not close it. */
  readonly kafka?: KafkaClient;
  /** Gives up the start: the connection attempts are dropped and the start rejects with the signal's reason. */
  readonly signal?: AbortSignal;
}

/**
 * The Kafka→Kafka dedup node: each partition batch in chunks of `input.batchSize` records, each parsed, looked
 * up, produced and delivered, marked, then its dead letters sent and its offset resolved (docs/node.md's steps).
 * Offsets are committed once per fetched batch; a crash repeats at most the chunk between its produce and its
 * mark. Under exactly-once, consecutive chunks share one Kafka transaction.
 */
export async function startDedupNode(
  config: NodeConfig,
  repository: IdempotentRepository,
  logger: Logger,
  options: DedupNodeOptions = {},
): Promise<DedupNodeHandle> {
  options.signal?.throwIfAborted();
  checkTtl(config, repository);
  const startup = new StartupWatch(logger, config.kafka);
  // 20 tries, backing off to 10 s: a broker away for a minute or two does not fail the batch.
  const kafka =
    options.kafka ??
    (await openKafkaClient(
      config.kafka,
      { retries: 20, logger, onLog: (entry) => startup.sees(entry) },
      { configKey: 'kafka.client', feature: 'idem node' },
    ));
  const bounded = new AbortController();
  const timer = setTimeout(() => bounded.abort(startup.timedOut()), config.kafka.startupTimeout);
  const signal = options.signal ? AbortSignal.any([options.signal, bounded.signal]) : bounded.signal;
  try {
    const handle = await start(config, repository, logger, kafka, signal);
    startup.started();
    if (options.kafka) return handle;
    let closing: Promise<void> | undefined;
    return { ...handle, stop: () => (closing ??= handle.stop().finally(() => kafka.close())) };
  } catch (error) {
    if (!options.kafka) await kafka.close().catch(() => undefined);
    throw error;
  } finally {
    // After a failed start, kafkajs may still be winding down attempts: they stay out of the log.
    clearTimeout(timer);
  }
}

async function start(
  config: NodeConfig,
  repository: IdempotentRepository,
  logger: Logger,
  kafka: KafkaClient,
  signal: AbortSignal,
): Promise<DedupNodeHandle> {
  const files = localFiles(config);
  const topics = nodeTopics(config);
  // Refused before any topic is touched.
  const transactions =
    config.output.guarantee === 'exactly-once'
      ? transactionalProducers(config, kafka.capabilities, files.instanceId)
      : undefined;
  const outputLimit = await prepareTopics(kafka, topics, signal);
  const metrics = new NodeMetrics();
  const perf = new PerfLog();
  const totals = emptyTotals();

  // Output records carry their partition; only dead letters are placed, by key.
  const producer = kafka.producer({ idempotent: true });
  const audit =
    topics.audit === undefined
      ? undefined
      : new DuplicateAudit(topics.audit, config.output, producer, kafka.errors);
  const output = new OutputWriter(producer, {
    topic: config.output.topic,
    maxBatchBytes: outputLimit.maxBatchBytes,
    refuseOverLimit: outputLimit.known,
    sendAttempts: config.output.sendAttempts,
    retryBackoffMs: config.output.retryBackoff,
    errors: kafka.errors,
    onRetry: (error, attempt) => {
      metrics.outputRetries.inc();
      logger.warn({ err: error, attempt }, 'output request failed; retrying');
    },
  });
  const consumer = kafka.consumer({
    groupId: config.input.groupId,
    sessionTimeoutMs: config.kafka.sessionTimeout,
    heartbeatIntervalMs: Math.max(500, Math.floor(config.kafka.sessionTimeout / 5)),
    maxWaitMs: config.input.batchTimeout,
    maxBytesPerPartition: config.input.maxBytesPerPartition,
    maxBytes: config.input.maxBytes,
    // Per-instance: a new owner starts once no other instance's transaction can still move the offsets.
    ...(transactions?.instanceId === undefined ? {} : { requireStableOffsets: true }),
  });
  const supervisor = new ConsumerSupervisor(consumer, kafka.errors, logger);

  const catchUp = new CatchUp(config.catchUp, config.input.batchSize, metrics, logger);
  const runtime: NodeRuntime = { kafka, producer, consumer, repository, metrics, perf, totals, logger };
  const chunkDeps: ChunkDeps = { ...runtime, dedup: config.dedup, dlqTopic: config.dlq.topic, audit, output };
  const chunks = new ChunkProcessor(chunkDeps);
  const partitions =
    topics.changelog === undefined
      ? undefined
      : new PartitionLifecycle({
          ...runtime,
          inputTopic: config.input.topic,
          outputTopic: config.output.topic,
          dlqTopic: config.dlq.topic,
          progressIntervalMs: config.perf.interval,
          changelogTopic: topics.changelog.topic,
          checkpointPath: files.checkpoint,
          transactions,
          // With a changelog, each partition has its own processor over its logged view of the store.
          chunkProcessor: (overrides) => new ChunkProcessor({ ...chunkDeps, ...overrides }),
        });
  consumer.onGroupJoin(({ memberId, generationId, assignment }) => {
    supervisor.joined();
    catchUp.reassigned();
    logger.info({ memberId, assignment }, 'joined the group');
    partitions
      ?.assigned(assignment[config.input.topic] ?? [], { memberId, generationId })
      .catch((error: unknown) => {
        logger.warn({ err: error }, 'closing revoked partitions failed');
      });
  });
  const loop = new BatchLoop({
    exactlyOnce: transactions !== undefined,
    batchSize: config.input.batchSize,
    sessionTimeoutMs: config.kafka.sessionTimeout,
    ...runtime,
    errors: kafka.errors,
    chunks,
    partitions,
    catchUp,
  });

  try {
    await untilAborted(
      (async () => {
        await producer.connect();
        // Per-instance: the previous run's open transaction is aborted before the group asks for stable offsets.
        await partitions?.start();
        if (transactions?.instanceId !== undefined) {
          logger.info(
            { transactionalId: transactions.instanceId, instanceIdFrom: transactions.instanceIdFrom },
            'exactly-once with one transactional producer for this instance, fenced by the group',
          );
        }
        await consumer.connect();
        await consumer.subscribe([config.input.topic], config.input.fromBeginning);
      })(),
      signal,
    );
  } catch (error) {
    // Drop the clients' connection attempts; their own retries end with the disconnect.
    await Promise.allSettled([consumer.disconnect(), producer.disconnect(), partitions?.close()]);
    throw error;
  }

  const metricsPort = config.metrics.enabled
    ? await metrics.listen(config.metrics.port, config.metrics.host)
    : undefined;
  const logPerf = () => {
    const summary = perf.flush();
    logger.info({ perf: summary }, formatPerf(summary));
  };
  const perfTimer = setInterval(() => {
    logPerf();
    catchUp.logProgress();
  }, config.perf.interval);
  perfTimer.unref();

  await supervisor.start(() => consumer.run({ partitionsConsumedConcurrently: 1, eachBatch: loop.handle }));

  let stopping: Promise<void> | undefined;
  return {
    metrics,
    metricsPort,
    failed: supervisor.failed,
    totals: () => ({ ...totals }),
    stop: () => {
      stopping ??= (async () => {
        supervisor.stop();
        clearInterval(perfTimer);
        try {
          await consumer.disconnect(); // waits for the chunk in hand; the batch commits before returning
          await partitions?.close(); // transactional producers, checkpoints
          await producer.disconnect();
        } finally {
          await repository.close(); // flushes a local store
          await metrics.close();
          logPerf();
        }
      })();
      return stopping;
    },
  };
}

/**
 * The node's start, as seen through the client's log: while it lasts, a failed connection attempt is logged once
 * (kafkajs logs every one of its 20 tries, twice), and the last one is kept for the line that gives up.
 */
class StartupWatch {
  #starting = true;
  #lastError: string | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly kafka: Pick<KafkaConnection, 'brokers' | 'startupTimeout'>,
  ) {}

  /** The start is over: the client's log passes through unchanged from now on. */
  started(): void {
    this.#starting = false;
  }

  /** The start timed out: what did not answer, and the last connection error the client reported. */
  timedOut(): StartupTimeoutError {
    return new StartupTimeoutError(
      `the Kafka brokers ${this.kafka.brokers.join(', ')} did not answer within ${formatDuration(this.kafka.startupTimeout)} ` +
        `(kafka.startupTimeout): ${this.#lastError ?? 'the start did not finish'}`,
    );
  }

  /** Whether the client's entry is logged as it is. */
  sees(entry: KafkaLogEntry): boolean {
    if (!this.#starting || entry.connectionFailure === undefined) return true;
    const told = this.#lastError !== undefined;
    this.#lastError = entry.connectionFailure;
    if (told) {
      this.logger.debug(entry.fields, entry.message);
      return false;
    }
    this.logger.warn(
      entry.fields,
      `cannot reach the Kafka brokers yet (${entry.message}); retrying for up to ` +
        `${formatDuration(this.kafka.startupTimeout)} (kafka.startupTimeout)`,
    );
    return false;
  }
}
