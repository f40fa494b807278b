import type { KafkaClient } from '../src/kafka/port/index.js';
import { jsonIdReader } from '../src/util/json-id.js';
import type { KafkajsCopySettings, RunningCopy } from './kafkajs-copy.js';

/**
 * What the bound rows add per record: the id read and a bare Set (the bound), or one of them alone, to split the
 * bound (the Set alone is keyed by the record key, which the bench's records share with their uid).
 */
export type BoundStep = 'id read + Set' | 'id read' | 'Set';

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
  /**
   * The least deduplication could cost (bench:kafka's bound row): each record's id read from its JSON value with
   * the node's own reader, looked up in a bare in-memory Set, a repeat dropped. No store, no DLQ, no durability.
   */
  dedupField?: string,
  step: BoundStep = 'id read + Set',
): Promise<RunningCopy> {
  const readId = dedupField === undefined || step === 'Set' ? undefined : jsonIdReader(dedupField);
  const drops = dedupField !== undefined && step !== 'id read';
  const seen = new Set<string>();
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
        let chunk = batch.messages.slice(i, i + chunkSize);
        const last = chunk[chunk.length - 1]?.offset as string;
        const total = chunk.length;
        if (drops) {
          chunk = chunk.filter((m) => {
            const id =
              readId === undefined ? (m.key as Buffer).toString('latin1') : readId(m.value as Uint8Array);
            if (typeof id !== 'string' && (!id.ok || id.id === undefined)) return false;
            const key = typeof id === 'string' ? id : (id.id as string);
            if (seen.has(key)) return false;
            seen.add(key);
            return true;
          });
        } else if (readId !== undefined) {
          for (const m of chunk) readId(m.value as Uint8Array);
        }
        if (chunk.length > 0) {
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
        }
        batch.resolveOffset(last);
        copied += total;
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
