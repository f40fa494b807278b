import { Consumer, FetchIsolationLevels, ListOffsetTimestamps } from '@platformatic/kafka';
import { byLeader, type FetchedPartition, type PartitionFetch, type PartitionReader } from '../port/index.js';
import { RawFetcher } from './fetch.js';
import { listOffsets } from './list-offsets.js';
import type { ClientContext } from './options.js';
import { recordBatch } from './records.js';
import { stepLimitMs, timeLimited } from './time-limit.js';

/**
 * The changelog reader's reads over a library consumer that never joins its group. Batches come as the broker
 * sent them, aborted ones included (fetch.ts says why): the changelog reader drops those itself.
 */
export class PlatformaticPartitionReader implements PartitionReader {
  readonly #consumer: Consumer;
  readonly #fetcher: RawFetcher;
  readonly #context: ClientContext;

  constructor(context: ClientContext) {
    const options = context.base;
    // A group id the class requires; this consumer joins no group.
    this.#consumer = new Consumer({
      ...options,
      clientId: `${options.clientId}-reader`,
      groupId: `${options.clientId}-reader-unused`,
      isolationLevel: FetchIsolationLevels.READ_COMMITTED,
    });
    context.watch(this.#consumer);
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
    const leaders = byLeader(request.topic, request.partitions, (p) => topic.partitions[p]?.leader);
    const responses = await Promise.all(
      [...leaders].map(([node, partitions]) => {
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
            batches: (p.records ?? []).map(recordBatch),
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
