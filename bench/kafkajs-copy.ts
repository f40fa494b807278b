import type { Kafka, KafkaMessage } from 'kafkajs';

/** The fetch and chunk settings of a plain copy: the node's own (`config.input`), so the baseline is like for like. */
export interface KafkajsCopySettings {
  readonly groupId: string;
  readonly input: string;
  readonly output: string;
  readonly chunkSize: number;
  readonly maxWaitMs: number;
  readonly maxBytesPerPartition: number;
  readonly maxBytes: number;
  readonly sessionTimeout?: number;
}

/** A running copy: how many records it has copied so far, and how to stop it. */
export interface RunningCopy {
  copied(): number;
  stop(): Promise<void>;
}

/**
 * The kafkajs consume → produce copy both Kafka benches measure against (bench:kafka's baseline, bench:kafka-clients'
 * kafkajs row): eachBatch, chunks sent one idempotent acks=all request at a time to the same partition, offsets
 * committed once per fetched batch, as the node does.
 */
export async function startKafkajsCopy(kafka: Kafka, settings: KafkajsCopySettings): Promise<RunningCopy> {
  const { output, chunkSize } = settings;
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  const consumer = kafka.consumer({
    groupId: settings.groupId,
    ...(settings.sessionTimeout === undefined ? {} : { sessionTimeout: settings.sessionTimeout }),
    maxWaitTimeInMs: settings.maxWaitMs,
    maxBytesPerPartition: settings.maxBytesPerPartition,
    maxBytes: settings.maxBytes,
  });
  await producer.connect();
  await consumer.connect();
  await consumer.subscribe({ topic: settings.input, fromBeginning: true });
  let copied = 0;
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat }) => {
      let last: KafkaMessage | undefined;
      for (let i = 0; i < batch.messages.length; i += chunkSize) {
        const chunk = batch.messages.slice(i, i + chunkSize);
        await producer.send({
          topic: output,
          acks: -1,
          messages: chunk.map((m) => ({
            key: m.key,
            value: m.value,
            headers: m.headers,
            timestamp: m.timestamp,
            partition: batch.partition,
          })),
        });
        last = chunk[chunk.length - 1] as KafkaMessage;
        resolveOffset(last.offset);
        copied += chunk.length;
        await heartbeat();
      }
      if (last) {
        const offset = String(Number(last.offset) + 1);
        await commitOffsetsIfNecessary({
          topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset }] }],
        });
      }
    },
  });
  return {
    copied: () => copied,
    stop: async () => {
      await consumer.disconnect();
      await producer.disconnect();
    },
  };
}
