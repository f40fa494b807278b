import {
  type ClusterMetadata,
  ConnectionPool,
  type Consumer,
  FetchIsolationLevels,
  type RecordsBatch,
} from '@platformatic/kafka';
import { AbortedTransactions, type PartitionFetch } from '../port/index.js';
import { send } from './internals.js';
import type { ClientContext } from './options.js';
import { CONTROL_BATCH, TRANSACTIONAL_BATCH } from './records.js';

/*
 * Fetch without the library's read_committed filter, which keys aborted ranges by producer id only: two aborted
 * transactions of one id in a response (a restarted exactly-once node keeps it) drop the batches between. So the
 * port fetches on its own connections (a long poll must not delay the group) and filters as Kafka does.
 */

interface RawFetchPartition {
  readonly partitionIndex: number;
  readonly errorCode: number;
  readonly highWatermark: bigint;
  readonly lastStableOffset: bigint;
  readonly abortedTransactions:
    | readonly { readonly producerId: bigint; readonly firstOffset: bigint }[]
    | null;
  records?: RecordsBatch[];
}

interface RawFetchResponse {
  readonly responses: readonly { readonly topicId: string; readonly partitions: RawFetchPartition[] }[];
}

/** Sends read_committed Fetch requests for a client, on connections of its own. */
export class RawFetcher {
  readonly #pool: ConnectionPool;

  constructor(
    private readonly context: ClientContext,
    private readonly library: Consumer,
  ) {
    const { clientId, ...connection } = context.base;
    this.#pool = new ConnectionPool(`${clientId}-fetch`, connection);
  }

  /** One Fetch of partitions of `topic` from `leader`; partition errors and the step limit reject. */
  async fetch(
    metadata: ClusterMetadata,
    leader: number,
    topic: string,
    partitions: readonly { readonly partition: number; readonly offset: bigint }[],
    limits: Omit<PartitionFetch, 'topic' | 'partitions'>,
  ): Promise<RawFetchResponse> {
    const broker = metadata.brokers.get(leader);
    if (broker === undefined) throw new Error(`broker ${leader} is not in the metadata`);
    const topicId = metadata.topics.get(topic)?.id;
    if (topicId === undefined) throw new Error(`topic ${topic} is not in the metadata`);
    const { maxWaitMs, maxBytes, maxBytesPerPartition: partitionMaxBytes } = limits;
    const asked = partitions.map(({ partition, offset: fetchOffset }) => {
      return { partition, fetchOffset, partitionMaxBytes, currentLeaderEpoch: -1, lastFetchedEpoch: -1 };
    });
    const topics = [{ topicId, partitions: asked }];
    // minBytes 1, read_committed, no fetch session (id and epoch 0), nothing forgotten, no rack.
    const fields = [maxWaitMs, 1, maxBytes, FetchIsolationLevels.READ_COMMITTED, 0, 0, topics, [], ''];
    const response = send<RawFetchResponse>(this.library, 'Fetch', () => this.#pool.get(broker), ...fields);
    return this.context.limited(`a fetch from ${broker.host}:${broker.port}`, response);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#pool.close(() => resolve()));
  }
}

/** The batches a read_committed reader is given ({@link AbortedTransactions}), control batches included. */
export function dropAborted(
  batches: readonly RecordsBatch[],
  aborted: readonly { readonly producerId: bigint; readonly firstOffset: bigint }[] | null,
): readonly RecordsBatch[] {
  if (!aborted || aborted.length === 0) return batches;
  const filter = new AbortedTransactions(aborted);
  return batches.filter((b) => {
    const control = (b.attributes & CONTROL_BATCH) !== 0;
    // An abort marker is control type 0.
    const abort = control && b.records[0]?.key?.readInt16BE(2) === 0;
    const transactional = (b.attributes & TRANSACTIONAL_BATCH) !== 0;
    return filter.keeps(
      b.firstOffset + BigInt(b.lastOffsetDelta),
      b.producerId,
      transactional,
      control,
      abort,
    );
  });
}
