import type { Consumer, EachBatchPayload } from 'kafkajs';
import type {
  ConsumedBatch,
  ConsumedMessage,
  ConsumerCrash,
  GroupConsumer,
  GroupConsumerOptions,
  GroupJoin,
  GroupMetadata,
  RunOptions,
  TopicPartitions,
  TransactionOffsets,
} from '../port/index.js';

/** The kafkajs consumer config for the port's options (`extra` last: the adapter's own kafkajs settings). */
export function kafkajsConsumerConfig(
  options: GroupConsumerOptions,
): Parameters<import('kafkajs').Kafka['consumer']>[0] {
  return {
    sessionTimeout: options.sessionTimeoutMs,
    heartbeatInterval: options.heartbeatIntervalMs,
    maxWaitTimeInMs: options.maxWaitMs,
    maxBytesPerPartition: options.maxBytesPerPartition,
    maxBytes: options.maxBytes,
    allowAutoTopicCreation: options.allowAutoTopicCreation ?? false,
    ...options.extra,
    groupId: options.groupId,
  };
}

/** A kafkajs `eachBatch` payload as the port's batch (its functions are closures: passed as they are). */
function portBatch(payload: EachBatchPayload, commits: Map<string, string>): ConsumedBatch {
  const { batch } = payload;
  const { topic, partition } = batch;
  return {
    topic,
    partition,
    // Record-batch entries (the only format a Kafka 4 broker serves) always carry their headers.
    messages: batch.messages as ConsumedMessage[],
    highWatermark: batch.highWatermark,
    lastOffset: () => batch.lastOffset(),
    heartbeat: payload.heartbeat,
    commit: async (nextOffset) => {
      await payload.commitOffsetsIfNecessary({
        topics: [{ topic, partitions: [{ partition, offset: nextOffset }] }],
      });
      commits.set(partitionKey(topic, partition), nextOffset);
    },
    resolveOffset: payload.resolveOffset,
    isRunning: payload.isRunning,
    isStale: payload.isStale,
  };
}

const partitionKey = (topic: string, partition: number): string => `${topic}:${partition}`;

const mutable = (partitions: readonly TopicPartitions[]) =>
  partitions.map((p) => ({ topic: p.topic, partitions: [...p.partitions] }));

export class KafkajsConsumer implements GroupConsumer {
  #memberId: string | undefined;
  /** Per assigned partition, the commit this member knows: its first batch's start, then its commits. */
  readonly #commits = new Map<string, string>();

  constructor(
    readonly native: Consumer,
    readonly groupId: string,
  ) {
    native.on(native.events.GROUP_JOIN, ({ payload }) => {
      this.#memberId = payload.memberId;
      // A new assignment: kafkajs reads each partition's position from the group's commits again.
      this.#commits.clear();
    });
  }

  /**
   * A transaction committed these offsets (KafkajsTransaction.commit): a batch failing after it is fetched
   * again from there. Only partitions with a batch in this assignment (a new one reads the group's commits).
   */
  transactionCommitted(topics: TransactionOffsets['topics']): void {
    for (const { topic, partitions } of topics) {
      for (const { partition, offset } of partitions) {
        const key = partitionKey(topic, partition);
        if (this.#commits.has(key)) this.#commits.set(key, offset);
      }
    }
  }

  connect(): Promise<void> {
    return this.native.connect();
  }

  subscribe(topics: readonly string[], fromBeginning: boolean): Promise<void> {
    return this.native.subscribe({ topics: [...topics], fromBeginning });
  }

  run(options: RunOptions): Promise<void> {
    const { eachBatch } = options;
    return this.native.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: options.partitionsConsumedConcurrently,
      eachBatch: async (payload) => {
        const { topic, partition } = payload.batch;
        const key = partitionKey(topic, partition);
        if (!this.#commits.has(key)) {
          const fetched = (payload.batch as { fetchedOffset?: string }).fetchedOffset;
          const start = fetched ?? payload.batch.messages[0]?.offset;
          if (start !== undefined) this.#commits.set(key, start);
        }
        try {
          await eachBatch(portBatch(payload, this.#commits));
        } catch (error) {
          // The port promises a fetch from the last commit; kafkajs would fetch on from the last resolved offset.
          const committed = this.#commits.get(key);
          if (committed !== undefined) payload.resolveOffset(String(BigInt(committed) - 1n));
          throw error;
        }
      },
    });
  }

  stop(): Promise<void> {
    return this.native.stop();
  }

  disconnect(): Promise<void> {
    return this.native.disconnect();
  }

  pause(partitions: readonly TopicPartitions[]): void {
    this.native.pause(mutable(partitions));
  }

  resume(partitions: readonly TopicPartitions[]): void {
    try {
      this.native.resume(mutable(partitions));
    } catch {
      // kafkajs throws when its group is gone (stopped, or restarting): a new group starts with nothing paused.
    }
  }

  /** kafkajs does not expose the generation (and sends none with a transaction's offsets). */
  groupMetadata(): GroupMetadata {
    return { groupId: this.groupId, memberId: this.#memberId };
  }

  onGroupJoin(listener: (join: GroupJoin) => void): () => void {
    return this.native.on(this.native.events.GROUP_JOIN, ({ payload }) =>
      listener({ memberId: payload.memberId, generationId: undefined, assignment: payload.memberAssignment }),
    );
  }

  onCrash(listener: (crash: ConsumerCrash) => void): () => void {
    return this.native.on(this.native.events.CRASH, ({ payload }) =>
      listener({ error: payload.error, restart: payload.restart }),
    );
  }

  onFetchStart(listener: () => void): () => void {
    return this.native.on(this.native.events.FETCH_START, () => listener());
  }

  warn(message: string, fields?: object): void {
    this.native.logger().warn(message, fields ?? {});
  }
}
