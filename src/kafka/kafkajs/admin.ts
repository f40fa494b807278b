import type { Admin, ConfigResourceTypes } from 'kafkajs';
import type { KafkaAdmin, NewTopic, PartitionOffsetRange } from '../port/index.js';

/** ConfigResourceTypes.TOPIC: kafkajs's CommonJS build does not expose its enums as named ESM exports. */
const TOPIC_RESOURCE = 2 as ConfigResourceTypes;

/** A kafkajs admin behind the port. */
export class KafkajsAdmin implements KafkaAdmin {
  constructor(readonly native: Admin) {}

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
    return (found?.partitions ?? []).map((p) => p.partitionId).sort((a, b) => a - b);
  }

  createTopics(topics: readonly NewTopic[]): Promise<boolean> {
    return this.native.createTopics({
      topics: topics.map((t) => ({
        topic: t.topic,
        ...(t.numPartitions === undefined ? {} : { numPartitions: t.numPartitions }),
        ...(t.replicationFactor === undefined ? {} : { replicationFactor: t.replicationFactor }),
        ...(t.configEntries === undefined ? {} : { configEntries: [...t.configEntries] }),
      })),
      waitForLeaders: true,
    });
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
    const offsets = await this.native.fetchTopicOffsets(topic);
    return offsets.map((o) => ({ partition: o.partition, low: o.low, high: o.high }));
  }

  async groupOffsets(groupId: string, topic: string): Promise<{ partition: number; offset: string }[]> {
    const [entry] = await this.native.fetchOffsets({ groupId, topics: [topic] });
    return (entry?.partitions ?? []).map((p) => ({ partition: p.partition, offset: p.offset }));
  }

  deleteTopics(topics: readonly string[]): Promise<void> {
    return this.native.deleteTopics({ topics: [...topics] });
  }
}
