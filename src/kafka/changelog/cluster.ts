import type { Kafka } from 'kafkajs';
import { RepositoryError } from '../../errors.js';

/*
 * kafkajs has no manual partition assignment: its only reader is a group consumer, and a throwaway group pays a
 * group join for every restore (3 s on a broker with the default group.initial.rebalance.delay.ms). The changelog
 * reader instead talks to the partition leaders with the client's own cluster object, which every kafkajs
 * producer, consumer and admin is built on: metadata, ListOffsets and Fetch, with no group at all. That object is
 * not public API, so it is reached once, here, and checked; kafkajs is pinned at 2.x (its last line) and the
 * changelog tests exercise every call below against a real broker.
 */

/** One decoded record of a fetch response, as kafkajs's RecordBatch decoder returns it. */
export interface RawRecord {
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, Buffer | string | (Buffer | string)[] | undefined>;
  readonly isControlRecord: boolean;
  readonly batchContext: {
    readonly firstOffset: string;
    readonly lastOffsetDelta: number;
    readonly producerId: string;
    readonly inTransaction: boolean;
  };
}

/** One partition of a fetch response. */
export interface RawPartition {
  readonly partition: number;
  readonly errorCode: number;
  readonly highWatermark: string;
  readonly lastStableOffset?: string;
  readonly abortedTransactions?: readonly { readonly producerId: string; readonly firstOffset: string }[];
  readonly messages: readonly RawRecord[];
}

/** The parts of a kafkajs broker connection the reader uses. */
export interface RawBroker {
  fetch(request: {
    isolationLevel: number;
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    topics: { topic: string; partitions: { partition: number; fetchOffset: string; maxBytes: number }[] }[];
  }): Promise<{ responses: { topicName: string; partitions: RawPartition[] }[] }>;
}

/** The parts of kafkajs's cluster object the reader uses. */
export interface RawCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  isConnected(): boolean;
  refreshMetadata(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  findTopicPartitionMetadata(topic: string): { partitionId: number; leader: number }[];
  findBroker(where: { nodeId: string }): Promise<RawBroker>;
  fetchTopicsOffset(
    topics: { topic: string; partitions: { partition: number }[]; fromBeginning: boolean }[],
  ): Promise<{ topic: string; partitions: { partition: number; offset: string }[] }[]>;
}

/** kafkajs's read_committed isolation level. */
export const READ_COMMITTED = 1;

type CreateCluster = (options: {
  allowAutoTopicCreation: boolean;
  isolationLevel: number;
  metadataMaxAge?: number;
}) => RawCluster;

/** A read_committed cluster connection built from the client's own settings (brokers, TLS, SASL, retries). */
export function createCluster(kafka: Kafka): RawCluster {
  const symbol = Object.getOwnPropertySymbols(kafka).find(
    (s) => s.description === 'private:Kafka:createCluster',
  );
  const create = symbol === undefined ? undefined : (kafka as unknown as Record<symbol, unknown>)[symbol];
  if (typeof create !== 'function') {
    throw new RepositoryError(
      'the changelog reader needs kafkajs 2.x (its cluster factory was not found on the Kafka client)',
      { retryable: false },
    );
  }
  return (create as CreateCluster)({ allowAutoTopicCreation: false, isolationLevel: READ_COMMITTED });
}
