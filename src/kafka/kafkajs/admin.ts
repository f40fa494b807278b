import type { Admin, ConfigResourceTypes } from 'kafkajs';
import { type KafkaAdmin, type NewTopic, type PartitionOffsetRange, waitForLeaders } from '../port/index.js';
import { retryRead } from './errors.js';
import { KAFKAJS_DEFAULT_RETRIES } from './options.js';

/** Partition ids of kafkajs metadata, sorted (kafkajs keeps the broker's order; the port's is the ids'). */
export const sortedIds = (partitions: readonly { partitionId: number }[]): number[] =>
  partitions.map((p) => p.partitionId).sort((a, b) => a - b);

const byPartition = <T extends { partition: number }>(entries: T[]): T[] =>
  entries.sort((a, b) => a.partition - b.partition);

/** ConfigResourceTypes.TOPIC: kafkajs's CommonJS build does not expose its enums as named ESM exports. */
const TOPIC_RESOURCE = 2 as ConfigResourceTypes;

export class KafkajsAdmin implements KafkaAdmin {
  constructor(
    readonly native: Admin,
    /** The budget of {@link topicOffsets}'s own retries. */
    readonly retries: number = KAFKAJS_DEFAULT_RETRIES,
  ) {}

  connect(): Promise<void> {
    return this.native.connect();
  }

  disconnect(): Promise<void> {
    return this.native.disconnect();
  }

  listTopics(): Promise<string[]> {
    return this.native.listTopics();
  }

  async topicPartitions(topic: string): Promise<number[]> {
    const { topics } = await this.native.fetchTopicMetadata({ topics: [topic] });
    const found = topics.find((t) => t.name === topic) ?? topics[0];
    return sortedIds(found?.partitions ?? []);
  }

  async createTopics(topics: readonly NewTopic[]): Promise<boolean> {
    const created = await this.native.createTopics({
      topics: topics.map((t) => ({ ...t, configEntries: t.configEntries && [...t.configEntries] })),
      // Not kafkajs's own wait: on a busy broker its metadata request for a topic just created can meet
      // UNKNOWN_TOPIC_OR_PARTITION ("This server does not host this topic-partition"), which it does not retry.
      waitForLeaders: false,
    });
    const names = topics.map((t) => t.topic);
    if (created) await waitForLeaders(names, () => this.#leadersServe(names));
    return created;
  }

  async #leadersServe(topics: string[]): Promise<boolean> {
    const metadata = await this.native.fetchTopicMetadata({ topics });
    const ready = topics.every((name) => {
      const partitions = metadata.topics.find((t) => t.name === name)?.partitions ?? [];
      return partitions.length > 0 && partitions.every((p) => p.leader >= 0);
    });
    // Leaders in the metadata are not yet leaders serving the partition (NOT_LEADER_FOR_PARTITION, which
    // kafkajs's offset calls do not retry): ready once the topic's offsets can be listed.
    if (ready) await Promise.all(topics.map((topic) => this.native.fetchTopicOffsets(topic)));
    return ready;
  }

  async describeTopicConfigs(topic: string, names: readonly string[]): Promise<Map<string, string>> {
    const { resources } = await this.native.describeConfigs({
      resources: [{ type: TOPIC_RESOURCE, name: topic, configNames: [...names] }],
      includeSynonyms: false,
    });
    const entries = resources[0]?.configEntries ?? [];
    return new Map(entries.map((e) => [e.configName, e.configValue]));
  }

  async deleteRecords(topic: string, partitions?: readonly number[]): Promise<void> {
    // Also loads the topic's metadata into the admin client, which deleteTopicRecords needs.
    const all = await this.topicPartitions(topic);
    const wanted = partitions === undefined ? all : all.filter((p) => partitions.includes(p));
    await this.native.deleteTopicRecords({
      topic,
      partitions: wanted.map((partition) => ({ partition, offset: '-1' })),
    });
  }

  async topicOffsets(topic: string): Promise<PartitionOffsetRange[]> {
    // The admin's metadata refreshes once expired: retries reach a restarted broker, later a moved leader.
    const offsets = await retryRead(this.retries, () => this.native.fetchTopicOffsets(topic));
    return byPartition(offsets.map((o) => ({ partition: o.partition, low: o.low, high: o.high })));
  }

  async groupOffsets(groupId: string, topic: string): Promise<{ partition: number; offset: string }[]> {
    const [entry] = await this.native.fetchOffsets({ groupId, topics: [topic] });
    return byPartition((entry?.partitions ?? []).map((p) => ({ partition: p.partition, offset: p.offset })));
  }

  deleteTopics(topics: readonly string[]): Promise<void> {
    return this.native.deleteTopics({ topics: [...topics] });
  }
}
