import { ConfigError } from '../errors.js';
import { checkChangelogTopic, ensureChangelogTopic } from '../kafka/changelog/index.js';
import type { KafkaAdmin, KafkaClient } from '../kafka/port/index.js';
import { untilAborted } from './abort.js';
import { changelogEnabled, changelogTopic, type NodeConfig } from './options.js';

/** What the node learns about its topics before it starts. */
export interface TopicLayout {
  readonly inputPartitions: number;
  /** The output topic's `max.message.bytes`: the largest record batch one request may carry. */
  readonly outputMaxBatchBytes: number;
  /** The changelog topic, when the config turns it on. */
  readonly changelogTopic: string | undefined;
}

/** Kafka's default `max.message.bytes`, assumed when the topic config cannot be read (no describe ACL). */
const DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;

/**
 * Checks the topics before the node consumes anything. The input must exist (a typo must not create an empty
 * topic and wait forever). The output keeps each record in its input partition, so it needs at least as many
 * partitions; a missing output is created with the input's count, a missing DLQ with the broker's default.
 * The changelog (when on) is created with the input's count too (changelog partition p holds input partition p's
 * marks), or checked when it exists.
 */
export async function prepareTopics(
  kafka: KafkaClient,
  config: NodeConfig,
  signal?: AbortSignal,
): Promise<TopicLayout> {
  const admin = kafka.admin();
  try {
    return await untilAborted(inspect(admin, config), signal);
  } finally {
    await admin.disconnect();
  }
}

/** What {@link prepareTopics} checks and creates, through a connected admin. */
async function inspect(admin: KafkaAdmin, config: NodeConfig): Promise<TopicLayout> {
  await admin.connect();
  // Listing first: asking for the metadata of a missing topic makes kafkajs log an error.
  const existing = new Set(await admin.listTopics());
  const count = (topic: string) => (existing.has(topic) ? partitionCount(admin, topic) : undefined);
  const inputPartitions = await count(config.input.topic);
  if (inputPartitions === undefined) {
    throw new ConfigError('input.topic', `topic ${JSON.stringify(config.input.topic)} does not exist`);
  }
  const outputPartitions = await count(config.output.topic);
  if (outputPartitions === undefined) {
    await create(admin, config.output.topic, inputPartitions);
  } else if (outputPartitions < inputPartitions) {
    throw new ConfigError(
      'output.topic',
      `topic ${JSON.stringify(config.output.topic)} has ${outputPartitions} partitions, fewer than the ` +
        `input's ${inputPartitions}: each record is written to its input partition number, to keep its order`,
    );
  }
  if (!existing.has(config.dlq.topic)) await create(admin, config.dlq.topic);
  await checkDuplicatesTopic(admin, config, existing, inputPartitions);
  const changelog = changelogEnabled(config) ? changelogTopic(config) : undefined;
  if (changelog !== undefined) {
    const retentionMs = config.dedup.window;
    const spec = { topic: changelog, partitions: inputPartitions, retentionMs, configKey: 'changelog.topic' };
    // Checked when it exists: asking kafkajs to create an existing topic logs an error line.
    if (existing.has(changelog)) await checkChangelogTopic(admin, spec);
    else await ensureChangelogTopic(admin, spec);
  }
  const outputMaxBatchBytes = await maxMessageBytes(admin, config.output.topic);
  return { inputPartitions, outputMaxBatchBytes, changelogTopic: changelog };
}

/**
 * `output.duplicatesTopic`, when set: its records go to their input partition number, as the output's do, so
 * it is created with the input's partition count and must have at least as many.
 */
async function checkDuplicatesTopic(
  admin: KafkaAdmin,
  config: NodeConfig,
  existing: ReadonlySet<string>,
  inputPartitions: number,
): Promise<void> {
  const topic = config.output.duplicatesTopic;
  if (topic === undefined) return;
  if (topic === config.input.topic || topic === config.output.topic || topic === config.dlq.topic) {
    throw new ConfigError(
      'output.duplicatesTopic',
      `topic ${JSON.stringify(topic)} is also the input, output or DLQ topic: the audit of duplicates needs its own`,
    );
  }
  if (!existing.has(topic)) {
    await create(admin, topic, inputPartitions);
    return;
  }
  const partitions = await partitionCount(admin, topic);
  if (partitions < inputPartitions) {
    throw new ConfigError(
      'output.duplicatesTopic',
      `topic ${JSON.stringify(topic)} has ${partitions} partitions, fewer than the input's ${inputPartitions}: ` +
        'each audit record is written to its input partition number',
    );
  }
}

async function partitionCount(admin: KafkaAdmin, topic: string): Promise<number> {
  return (await admin.topicPartitions(topic)).length;
}

async function create(admin: KafkaAdmin, topic: string, numPartitions?: number): Promise<void> {
  // false means it already exists: another instance created it at the same moment.
  await admin.createTopics([{ topic, ...(numPartitions ? { numPartitions } : {}) }]);
}

async function maxMessageBytes(admin: KafkaAdmin, topic: string): Promise<number> {
  try {
    const configs = await admin.describeTopicConfigs(topic, ['max.message.bytes']);
    const value = Number(configs.get('max.message.bytes'));
    return Number.isFinite(value) && value > 0 ? value : DEFAULT_MAX_MESSAGE_BYTES;
  } catch {
    return DEFAULT_MAX_MESSAGE_BYTES;
  }
}
