import { retrying } from './serial.js';

export interface NewTopic {
  readonly topic: string;
  /** Default: the broker's `num.partitions`. */
  readonly numPartitions?: number;
  /** Default -1: the broker's `default.replication.factor`. */
  readonly replicationFactor?: number;
  readonly configEntries?: readonly { readonly name: string; readonly value: string }[];
}

export interface PartitionOffsetRange {
  readonly partition: number;
  /** The first offset still in the log. */
  readonly low: string;
  /** The high watermark (the offset the next record gets). */
  readonly high: string;
}

/** Polls `ready` (the new topics' leaders serve them) every 100 ms for up to 30 s, then rejects. */
export function waitForLeaders(topics: readonly string[], ready: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  return retrying(
    async () => {
      if (!(await ready())) throw new Error(`topics ${topics.join(', ')} have no leader after 30 s`);
    },
    () => (Date.now() > deadline ? undefined : 100),
  );
}

/** The admin calls the node, the changelog and the `kafka` repository make. Connect before use. */
export interface KafkaAdmin {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  listTopics(): Promise<string[]>;
  /** The partition ids of an existing topic, sorted (list first: a missing one makes kafkajs log an error). */
  topicPartitions(topic: string): Promise<number[]>;
  /** Creates the topics and waits for their leaders; false when they all existed already. */
  createTopics(topics: readonly NewTopic[]): Promise<boolean>;
  /** The topic's values of these config names (a name the broker does not return is absent). */
  describeTopicConfigs(topic: string, names: readonly string[]): Promise<Map<string, string>>;
  /** Deletes every record of the given partitions (all partitions when omitted) up to their end (DeleteRecords). */
  deleteRecords(topic: string, partitions?: readonly number[]): Promise<void>;
  /** Each partition's log start and high watermark, in partition order. */
  topicOffsets(topic: string): Promise<PartitionOffsetRange[]>;
  /** A group's committed offsets of a topic (-1 where it committed none), as decimal strings, in partition order. */
  groupOffsets(groupId: string, topic: string): Promise<{ partition: number; offset: string }[]>;
  deleteTopics(topics: readonly string[]): Promise<void>;
}
