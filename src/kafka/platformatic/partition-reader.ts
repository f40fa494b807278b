import { Consumer, FetchIsolationLevels, ListOffsetTimestamps } from '@platformatic/kafka';
import {
  type FetchedPartition,
  fetchByLeader,
  type PartitionFetch,
  type PartitionReader,
} from '../port/index.js';
import { RawFetcher } from './fetch.js';
import { listOffsets } from './list-offsets.js';
import type { ClientContext } from './options.js';
import { recordBatch } from './records.js';

/** The changelog reader's reads over a library consumer that never joins its group (fetch.ts: its Fetch). */
export class PlatformaticPartitionReader implements PartitionReader {
  readonly #consumer: Consumer;
  readonly #fetcher: RawFetcher;

  constructor(private readonly context: ClientContext) {
    const { clientId } = context.base;
    // A group id the class requires; this consumer joins no group.
    this.#consumer = context.watch(
      new Consumer({
        ...context.base,
        clientId: `${clientId}-reader`,
        groupId: `${clientId}-reader-unused`,
        isolationLevel: FetchIsolationLevels.READ_COMMITTED,
      }),
    );
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
      retries: this.context.retries,
    });
    return new Map(partitions.map((p) => [p, Number(offsets.get(topic)?.get(p) ?? 0n)]));
  }

  async fetch(request: PartitionFetch): Promise<FetchedPartition[]> {
    const { topic } = request;
    const metadata = await this.#consumer.metadata({ topics: [topic] });
    const partitions = metadata.topics.get(topic)?.partitions;
    return fetchByLeader(
      request,
      (p) => partitions?.[p]?.leader,
      async (leader, ps) => {
        const asked = ps.map(({ partition, offset }) => ({ partition, offset: BigInt(offset) }));
        const response = await this.#fetcher.fetch(metadata, leader, topic, asked, request);
        return response.responses.flatMap((t) =>
          t.partitions.map((p) => ({
            partition: p.partitionIndex,
            errorCode: p.errorCode,
            abortedTransactions: (p.abortedTransactions ?? []).map((a) => ({
              producerId: Number(a.producerId),
              firstOffset: Number(a.firstOffset),
            })),
            batches: (p.records ?? []).map(recordBatch),
          })),
        );
      },
    );
  }

  async refreshMetadata(): Promise<void> {
    this.#consumer.clearMetadata();
    await this.context.limited(
      'a metadata refresh',
      this.#consumer.metadata({ topics: [], forceUpdate: true }),
    );
  }

  async close(): Promise<void> {
    await this.#fetcher.close();
    await this.#consumer.close(true);
  }
}
