import { type EachBatchPayload, Kafka, type KafkaMessage, logLevel, type SASLOptions } from 'kafkajs';
import type { Logger } from 'pino';
import { type DeadLetter, type DlqReason, sendDeadLetters } from '../adapters/kafka/dlq.js';
import { messageIdReader } from '../adapters/kafka/message-id.js';
import { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import type { BatchItem } from '../consumer/types.js';
import type { IdempotentRepository } from '../repositories/types.js';
import { NodeMetrics } from './metrics.js';
import type { NodeConfig } from './options.js';
import { formatPerf, PerfLog, type Phase } from './perf-log.js';

/** One input record on its way through the node. */
interface InputRecord {
  readonly message: KafkaMessage;
  readonly id: string | undefined;
}

/** What a running node exposes. */
export interface DedupNodeHandle {
  readonly metrics: NodeMetrics;
  /** The port `/metrics` is served on, when enabled. */
  readonly metricsPort: number | undefined;
  /** Finishes the batch in hand, commits it, flushes the store and disconnects. */
  stop(): Promise<void>;
}

/**
 * The Kafka→Kafka dedup node. Per partition batch, in this order:
 *   1. parse each record's dedup id (records that cannot be read go to the DLQ);
 *   2. look the ids up in the store (one call), dropping duplicates, first received wins;
 *   3. produce the survivors to the output topic, same partition, key and headers, and wait for their acks;
 *   4. mark their ids in the store (one call);
 *   5. commit the input offsets.
 * A crash anywhere before 5 re-reads the batch: records already produced but not yet marked are produced again
 * (at most one batch per partition leaks), and nothing is lost. See docs/node.md.
 */
export async function startDedupNode(
  config: NodeConfig,
  repository: IdempotentRepository,
  logger: Logger,
): Promise<DedupNodeHandle> {
  const metrics = new NodeMetrics();
  const perf = new PerfLog();
  const kafka = new Kafka({
    clientId: config.kafka.clientId,
    brokers: config.kafka.brokers,
    ssl: config.kafka.ssl,
    ...(config.kafka.sasl ? { sasl: config.kafka.sasl as SASLOptions } : {}),
    logLevel: logLevel.WARN,
    logCreator: () => (entry) => logger.warn({ kafkajs: entry.namespace, ...entry.log }, entry.log.message),
    // A broker outage of tens of seconds is ridden out rather than crashing the node.
    retry: { retries: 20, initialRetryTime: 300, maxRetryTime: 10_000 },
  });
  // Lazy mode: the mark comes after the output acks, so a crash between them repeats output rather than losing it.
  const dedup = new IdempotentConsumer<InputRecord>({
    repository,
    id: (record) => record.id,
    mode: 'lazy',
    ttlMs: config.dedup.window,
    storeFailure: config.dedup.storeFailure,
  });
  const readId = messageIdReader(config.dedup.id);
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: true });
  const consumer = kafka.consumer({
    groupId: config.input.groupId,
    sessionTimeout: config.kafka.sessionTimeout,
    heartbeatInterval: Math.max(1_000, Math.floor(config.kafka.sessionTimeout / 5)),
    maxWaitTimeInMs: config.input.batchTimeout,
    allowAutoTopicCreation: true,
  });

  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topic: config.input.topic, fromBeginning: config.input.fromBeginning });

  let metricsPort: number | undefined;
  if (config.metrics.enabled) metricsPort = await metrics.listen(config.metrics.port, config.metrics.host);
  const perfTimer = setInterval(() => {
    const summary = perf.flush();
    logger.info({ perf: summary }, formatPerf(summary));
  }, config.perf.interval);
  perfTimer.unref();

  let lastBatchEnd = performance.now();
  const timed = async <T>(phase: Phase, work: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    try {
      return await work();
    } finally {
      perf.add(phase, performance.now() - start);
    }
  };

  const handleChunk = async (payload: EachBatchPayload, messages: readonly KafkaMessage[]): Promise<void> => {
    const { topic, partition } = payload.batch;
    const batchStart = performance.now();
    const letters: DeadLetter[] = [];
    const records: InputRecord[] = [];
    await timed('parse', async () => {
      for (const message of messages) {
        const verdict = readId(message);
        if (!verdict.ok) letters.push(letter(topic, partition, message, verdict.reason, verdict.detail));
        else if (verdict.id === undefined && config.dedup.missingId === 'dlq') {
          letters.push(letter(topic, partition, message, 'no-id', `no value at ${describeId(config)}`));
        } else records.push({ message, id: verdict.id });
      }
    });

    let out = 0;
    let handlerStart = 0;
    let handlerEnd = 0;
    const lookupStart = performance.now();
    const { results } = await dedup.processBatch(
      records,
      {
        batch: async (items: readonly BatchItem<InputRecord>[]) => {
          handlerStart = performance.now();
          perf.add('lookup', handlerStart - lookupStart);
          metrics.storeSeconds.observe({ operation: 'lookup' }, (handlerStart - lookupStart) / 1000);
          const messagesOut = items.map(({ message: { message } }) => ({
            key: message.key,
            value: message.value,
            headers: message.headers,
            partition,
          }));
          perf.add('produce', performance.now() - handlerStart);
          await timed('deliver', () =>
            producer.send({ topic: config.output.topic, acks: -1, messages: messagesOut }),
          );
          out = messagesOut.length;
          handlerEnd = performance.now();
        },
      },
      { stream: `${topic}:${partition}` },
    );
    const failed = results.find((r) => r.outcome === 'failed');
    // The output send failed: nothing was marked; throwing makes kafkajs re-deliver the batch from the last commit.
    if (failed) throw failed.error;
    if (handlerEnd > 0) {
      const markMs = performance.now() - handlerEnd;
      perf.add('mark', markMs);
      metrics.storeSeconds.observe({ operation: 'mark' }, markMs / 1000);
    } else {
      perf.add('lookup', performance.now() - lookupStart);
    }

    if (letters.length > 0) {
      await timed('deliver', () => sendDeadLetters(producer, config.dlq.topic, letters));
      for (const l of letters) metrics.deadLetters.inc({ reason: l.reason });
      logger.warn(
        { topic, partition, count: letters.length, reasons: [...new Set(letters.map((l) => l.reason))] },
        'records sent to the DLQ',
      );
    }

    const last = messages[messages.length - 1] as KafkaMessage;
    await timed('commit', async () => {
      payload.resolveOffset(last.offset);
      await payload.commitOffsetsIfNecessary();
    });
    await payload.heartbeat();

    let dropped = 0;
    let noId = 0;
    for (const r of results) {
      if (r.outcome === 'duplicate') dropped++;
      else if (r.outcome === 'no-id') noId++;
    }
    metrics.recordsIn.inc(messages.length);
    metrics.recordsOut.inc(out);
    metrics.duplicates.inc(dropped);
    metrics.noId.inc(noId);
    metrics.lag.set(
      { topic, partition: String(partition) },
      Math.max(0, Number(payload.batch.highWatermark) - Number(last.offset) - 1),
    );
    metrics.batchSeconds.observe((performance.now() - batchStart) / 1000);
    perf.batch(messages.length, out, dropped, false);
  };

  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    partitionsConsumedConcurrently: 1,
    eachBatch: async (payload) => {
      const pollMs = performance.now() - lastBatchEnd;
      perf.add('poll', pollMs);
      if (pollMs >= config.input.batchTimeout * 0.9) perf.batch(0, 0, 0, true);
      const { messages } = payload.batch;
      for (let i = 0; i < messages.length; i += config.input.batchSize) {
        if (!payload.isRunning() || payload.isStale()) break;
        await handleChunk(payload, messages.slice(i, i + config.input.batchSize));
      }
      lastBatchEnd = performance.now();
    },
  });

  let stopping: Promise<void> | undefined;
  return {
    metrics,
    metricsPort,
    stop: () => {
      stopping ??= (async () => {
        clearInterval(perfTimer);
        await consumer.disconnect(); // waits for the batch in hand, which commits before returning
        await producer.disconnect();
        await repository.close(); // flushes a local store
        await metrics.close();
      })();
      return stopping;
    },
  };
}

function letter(
  topic: string,
  partition: number,
  message: KafkaMessage,
  reason: DlqReason,
  error: string,
): DeadLetter {
  return { topic, partition, message, reason, error, attempts: 0 };
}

function describeId(config: NodeConfig): string {
  const id = config.dedup.id;
  return id.from === 'value'
    ? `value path ${id.path}`
    : id.from === 'header'
      ? `header ${id.name}`
      : 'the record key';
}
