import { Consumer, FetchIsolationLevels, ListOffsetTimestamps, type RecordsBatch } from '@platformatic/kafka';
import type { FetchedPartition, PartitionFetch, PartitionReader, RecordBatch } from '../port/index.js';
import { RawFetcher } from './fetch.js';
import { listOffsets } from './list-offsets.js';
import type { ClientContext } from './options.js';
import { CONTROL_BATCH, TRANSACTIONAL_BATCH } from './records.js';
import { stepLimitMs, timeLimited } from './time-limit.js';

/** Header pairs as the reader's header record (a repeated name keeps its last value). */
function headerRecord(pairs: readonly (readonly [Buffer | null, Buffer | null])[]): Record<string, Buffer> {
  const headers: Record<string, Buffer> = {};
  for (const [name, value] of pairs) if (name !== null) headers[name.toString()] = value ?? Buffer.alloc(0);
  return headers;
}

function batch(b: RecordsBatch): RecordBatch {
  const base = Number(b.firstOffset);
  return {
    baseOffset: base,
    lastOffsetDelta: b.lastOffsetDelta,
    producerId: Number(b.producerId),
    inTransaction: (b.attributes & TRANSACTIONAL_BATCH) !== 0,
    isControl: (b.attributes & CONTROL_BATCH) !== 0,
    records: b.records.map((r) => ({
      offset: base + r.offsetDelta,
      key: r.key === null ? null : r.key.toString(),
      value: r.value,
      headers: headerRecord(r.headers),
    })),
  };
}

/**
 * The changelog reader's reads over a @platformatic/kafka consumer that never joins its group: metadata,
 * ListOffsets and Fetch, read_committed. The batches come as the broker sent them, aborted ones included (see
 * fetch.ts for why not through `Consumer.fetch`): the reader drops them itself, as the port asks.
 */
export class PlatformaticPartitionReader implements PartitionReader {
  readonly #consumer: Consumer;
  /** Fetch without the library's read_committed filter: the changelog reader drops aborted records itself. */
  readonly #fetcher: RawFetcher;
  readonly #context: ClientContext;

  constructor(context: ClientContext) {
    const options = context.base;
    // The group id is required by the class but never used: this consumer joins no group.
    this.#consumer = new Consumer({
      ...options,
      clientId: `${options.clientId}-reader`,
      groupId: `${options.clientId}-reader-unused`,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
    });
    context.watch(this.#consumer as never);
    this.#context = context;
    this.#fetcher = new RawFetcher(context, this.#consumer);
  }

  async partitions(topic: string): Promise<number[]> {
    const metadata = await this.#consumer.metadata({ topics: [topic], forceUpdate: true });
    const count = metadata.topics.get(topic)?.partitionsCount ?? 0;
    return Array.from({ length: count }, (_, i) => i);
  }

  async listOffsets(
    topic: string,
    partitions: readonly number[],
    which: 'earliest' | 'latest',
  ): Promise<Map<number, number>> {
    const offsets = await listOffsets(this.#consumer, {
      partitions: new Map([[topic, partitions]]),
      timestamp: which === 'earliest' ? ListOffsetTimestamps.EARLIEST : ListOffsetTimestamps.LATEST,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
      retries: this.#context.retries,
    });
    const listed = offsets.get(topic);
    return new Map(partitions.map((p) => [p, Number(listed?.get(p) ?? 0n)]));
  }

  async fetch(request: PartitionFetch): Promise<FetchedPartition[]> {
    const metadata = await this.#consumer.metadata({ topics: [request.topic] });
    const topic = metadata.topics.get(request.topic);
    if (topic === undefined) throw new Error(`topic ${request.topic} is not in the metadata`);
    const byLeader = new Map<number, { partition: number; offset: number }[]>();
    for (const p of request.partitions) {
      const leader = topic.partitions[p.partition]?.leader ?? -1;
      if (leader < 0) throw new Error(`partition ${request.topic}[${p.partition}] has no leader`);
      byLeader.set(leader, [...(byLeader.get(leader) ?? []), p]);
    }
    const responses = await Promise.all(
      [...byLeader].map(([node, partitions]) => {
        const broker = metadata.brokers.get(node);
        if (broker === undefined) throw new Error(`broker ${node} is not in the metadata`);
        return this.#fetcher.fetch(
          broker,
          topic.id,
          partitions.map((p) => ({
            partition: p.partition,
            fetchOffset: BigInt(p.offset),
            partitionMaxBytes: request.maxBytesPerPartition,
          })),
          { maxWaitMs: request.maxWaitMs, maxBytes: request.maxBytes },
        );
      }),
    );
    const fetched: FetchedPartition[] = [];
    for (const response of responses) {
      for (const t of response.responses) {
        for (const p of t.partitions) {
          fetched.push({
            partition: p.partitionIndex,
            errorCode: p.errorCode,
            abortedTransactions: (p.abortedTransactions ?? []).map((a) => ({
              producerId: Number(a.producerId),
              firstOffset: Number(a.firstOffset),
            })),
            batches: (p.records ?? []).map(batch),
          });
        }
      }
    }
    return fetched;
  }

  async refreshMetadata(): Promise<void> {
    this.#consumer.clearMetadata();
    await timeLimited('a metadata refresh', this.#consumer.metadata({ topics: [], forceUpdate: true }), {
      limitMs: stepLimitMs(this.#context.base.requestTimeout),
      warn: this.#context.warn,
    });
  }

  async close(): Promise<void> {
    await this.#fetcher.close();
    await this.#consumer.close(true);
  }
}
