import type { KafkaClient } from '../src/kafka/port/index.js';
import type { KafkajsCopySettings, RunningCopy } from './kafkajs-copy.js';

/**
 * The same plain copy as kafkajs-copy.ts through the package's own Kafka port (src/kafka/port), on whichever client
 * it was opened with: what the node runs on, minus parsing, store and DLQ. bench:kafka's baseline for the node on
 * `@platformatic/kafka` (issue 21: the node ≥ 0.9× its own client's copy) and bench:kafka-clients' `port` row.
 * Chunks are sent one idempotent acks=all request at a time to the same partition; offsets are committed once per
 * fetched batch.
 */
export async function startPortCopy(
  client: KafkaClient,
  settings: KafkajsCopySettings,
): Promise<RunningCopy> {
  const { output, chunkSize } = settings;
  const producer = client.producer({ idempotent: true });
  const consumer = client.consumer({
    groupId: settings.groupId,
    ...(settings.sessionTimeout === undefined ? {} : { sessionTimeoutMs: settings.sessionTimeout }),
    maxWaitMs: settings.maxWaitMs,
    maxBytesPerPartition: settings.maxBytesPerPartition,
    maxBytes: settings.maxBytes,
  });
  await producer.connect();
  await consumer.connect();
  await consumer.subscribe([settings.input], true);
  let copied = 0;
  await consumer.run({
    partitionsConsumedConcurrently: 1,
    eachBatch: async (batch) => {
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
        batch.resolveOffset(chunk[chunk.length - 1]?.offset as string);
        copied += chunk.length;
        await batch.heartbeat();
      }
      await batch.commit(String(BigInt(batch.lastOffset()) + 1n));
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
