import { Admin, ConfigResourceTypes, FetchIsolationLevels, ListOffsetTimestamps } from '@platformatic/kafka';
import { type KafkaAdmin, type NewTopic, type PartitionOffsetRange, waitForLeaders } from '../port/index.js';
import { findBy } from './errors.js';
import { listOffsets } from './list-offsets.js';
import type { ClientContext } from './options.js';

export class PlatformaticAdmin implements KafkaAdmin {
  #admin: Admin | undefined;

  constructor(private readonly context: ClientContext) {}

  async connect(): Promise<void> {
    if (this.#admin) return;
    const base = this.context.base;
    this.#admin = this.context.watch(new Admin({ ...base, clientId: `${base.clientId}-admin` }));
    // Reach a broker now: a wrong address fails here.
    await this.#admin.metadata({ topics: [] });
  }

  async disconnect(): Promise<void> {
    const admin = this.#admin;
    this.#admin = undefined;
    await admin?.close();
  }

  #need(): Admin {
    if (!this.#admin) throw new Error('Kafka admin: connect() first');
    return this.#admin;
  }

  async listTopics(): Promise<string[]> {
    return this.#need().listTopics({ includeInternals: false });
  }

  async topicPartitions(topic: string): Promise<number[]> {
    const metadata = await this.#need().metadata({ topics: [topic], forceUpdate: true });
    const count = metadata.topics.get(topic)?.partitionsCount;
    if (count === undefined) throw new Error(`topic ${topic} does not exist`);
    return Array.from({ length: count }, (_, i) => i);
  }

  async createTopics(topics: readonly NewTopic[]): Promise<boolean> {
    const admin = this.#need();
    let created = false;
    for (const t of topics) {
      try {
        await admin.createTopics({
          topics: [t.topic],
          partitions: t.numPartitions ?? -1,
          replicas: t.replicationFactor ?? -1,
          configs: (t.configEntries ?? []).map(({ name, value }) => ({ name, value })),
        });
        created = true;
      } catch (error) {
        if (!findBy(error, 'apiId', 'TOPIC_ALREADY_EXISTS')) throw error;
      }
    }
    const names = topics.map((t) => t.topic);
    if (created) await waitForLeaders(names, () => this.#leadersKnown(names));
    return created;
  }

  async #leadersKnown(topics: string[]): Promise<boolean> {
    const metadata = await this.#need().metadata({ topics, forceUpdate: true });
    return topics.every((name) => metadata.topics.get(name)?.partitions.every((p) => p.leader >= 0) === true);
  }

  async describeTopicConfigs(topic: string, names: readonly string[]): Promise<Map<string, string>> {
    const [description] = await this.#need().describeConfigs({
      resources: [
        { resourceType: ConfigResourceTypes.TOPIC, resourceName: topic, configurationKeys: [...names] },
      ],
    });
    const result = new Map<string, string>();
    for (const config of description?.configs ?? []) {
      if (typeof config.value === 'string' && names.includes(config.name))
        result.set(config.name, config.value);
    }
    return result;
  }

  async deleteRecords(topic: string, partitions?: readonly number[]): Promise<void> {
    const ids = partitions ?? (await this.topicPartitions(topic));
    const ends = await this.#offsets(topic, ids, ListOffsetTimestamps.LATEST);
    await this.#need().deleteRecords({
      topics: [
        {
          name: topic,
          partitions: ids.map((partition) => ({ partition, offset: ends.get(partition) ?? 0n })),
        },
      ],
    });
  }

  async topicOffsets(topic: string): Promise<PartitionOffsetRange[]> {
    const ids = await this.topicPartitions(topic);
    const [low, high] = await Promise.all([
      this.#offsets(topic, ids, ListOffsetTimestamps.EARLIEST),
      this.#offsets(topic, ids, ListOffsetTimestamps.LATEST),
    ]);
    return ids.map((partition) => ({
      partition,
      low: String(low.get(partition) ?? 0n),
      high: String(high.get(partition) ?? 0n),
    }));
  }

  async #offsets(
    topic: string,
    partitions: readonly number[],
    timestamp: bigint,
  ): Promise<Map<number, bigint>> {
    const offsets = await listOffsets(this.#need(), {
      partitions: new Map([[topic, partitions]]),
      timestamp,
      isolationLevel: FetchIsolationLevels.READ_UNCOMMITTED,
      retries: this.context.retries,
    });
    return offsets.get(topic) ?? new Map();
  }

  async groupOffsets(groupId: string, topic: string): Promise<{ partition: number; offset: string }[]> {
    const ids = await this.topicPartitions(topic);
    const [group] = await this.#need().listConsumerGroupOffsets({
      groups: [{ groupId, topics: [{ name: topic, partitionIndexes: ids }] }],
    });
    const committed = new Map<number, bigint>();
    for (const t of group?.topics ?? []) {
      for (const p of t.partitions) committed.set(p.partitionIndex, p.committedOffset);
    }
    return ids.map((partition) => ({ partition, offset: String(committed.get(partition) ?? -1n) }));
  }

  async deleteTopics(topics: readonly string[]): Promise<void> {
    if (topics.length > 0) await this.#need().deleteTopics({ topics: [...topics] });
  }
}
