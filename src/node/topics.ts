import kafkajs, { type Admin, type Kafka } from 'kafkajs';
import { ConfigError } from '../errors.js';
import { untilAborted } from './abort.js';
import type { NodeConfig } from './options.js';

// kafkajs is CommonJS and Node's ESM loader does not see this export by name.
const { ConfigResourceTypes } = kafkajs;

/** What the node learns about its topics before it starts. */
export interface TopicLayout {
  readonly inputPartitions: number;
  /** The output topic's `max.message.bytes`: the largest record batch one request may carry. */
  readonly outputMaxBatchBytes: number;
}

/** Kafka's default `max.message.bytes`, assumed when the topic config cannot be read (no describe ACL). */
const DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;

/**
 * Checks the topics before the node consumes anything. The input must exist (a typo must not create an empty
 * topic and wait forever). The output keeps each record in its input partition, so it needs at least as many
 * partitions; a missing output is created with the input's count, a missing DLQ with the broker's default.
 */
export async function prepareTopics(
  kafka: Kafka,
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
async function inspect(admin: Admin, config: NodeConfig): Promise<TopicLayout> {
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
  return { inputPartitions, outputMaxBatchBytes: await maxMessageBytes(admin, config.output.topic) };
}

/**
 * `output.duplicatesTopic`, when set: its records go to their input partition number, as the output's do, so
 * it is created with the input's partition count and must have at least as many.
 */
async function checkDuplicatesTopic(
  admin: Admin,
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

async function partitionCount(admin: Admin, topic: string): Promise<number> {
  const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
  return topics[0]?.partitions.length ?? 0;
}

async function create(admin: Admin, topic: string, numPartitions?: number): Promise<void> {
  // false means it already exists: another instance created it at the same moment.
  await admin.createTopics({
    topics: [{ topic, ...(numPartitions ? { numPartitions } : {}) }],
    waitForLeaders: true,
  });
}

async function maxMessageBytes(admin: Admin, topic: string): Promise<number> {
  try {
    const { resources } = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configNames: ['max.message.bytes'] }],
      includeSynonyms: false,
    });
    const value = Number(resources[0]?.configEntries[0]?.configValue);
    return Number.isFinite(value) && value > 0 ? value : DEFAULT_MAX_MESSAGE_BYTES;
  } catch {
    return DEFAULT_MAX_MESSAGE_BYTES;
  }
}
