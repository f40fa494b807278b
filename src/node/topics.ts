import { ConfigError } from '../errors.js';
import { checkChangelogTopic, ensureChangelogTopic } from '../kafka/changelog/index.js';
import type { KafkaAdmin, KafkaClient } from '../kafka/port/index.js';
import { untilAborted } from './abort.js';
import type { NodeTopics } from './options.js';

/** Kafka's default `max.message.bytes`, assumed when the topic config cannot be read (no describe ACL). */
const DEFAULT_MAX_MESSAGE_BYTES = 1_048_588;

/** The output topic's `max.message.bytes`, and whether it was read from the topic (else the default is assumed). */
export interface OutputLimit {
  readonly maxBatchBytes: number;
  readonly known: boolean;
}

/**
 * Checks the topics before the node consumes anything. The input must exist (a typo must not create an empty topic
 * and wait forever). The output, audit and changelog topics need the input's partition count at least (a missing
 * one is created with it), a missing DLQ gets the broker's default. Resolves with the output's `max.message.bytes`.
 */
export async function prepareTopics(
  kafka: KafkaClient,
  topics: NodeTopics,
  signal?: AbortSignal,
): Promise<OutputLimit> {
  const admin = kafka.admin();
  try {
    return await untilAborted(inspect(admin, topics), signal);
  } finally {
    await admin.disconnect();
  }
}

async function inspect(admin: KafkaAdmin, topics: NodeTopics): Promise<OutputLimit> {
  await admin.connect();
  // Listing first: asking for the metadata of a missing topic makes kafkajs log an error.
  const existing = new Set(await admin.listTopics());
  const { input, output, dlq, audit, changelog } = topics;
  if (!existing.has(input)) {
    throw new ConfigError('input.topic', `topic ${JSON.stringify(input)} does not exist`);
  }
  const inputPartitions = (await admin.topicPartitions(input)).length;
  const partitioned = async (key: string, topic: string, why: string) => {
    // A createTopics answering false (it exists): another instance created it at the same moment.
    if (!existing.has(topic)) return admin.createTopics([{ topic, numPartitions: inputPartitions }]);
    const partitions = (await admin.topicPartitions(topic)).length;
    if (partitions >= inputPartitions) return;
    throw new ConfigError(
      key,
      `topic ${JSON.stringify(topic)} has ${partitions} partitions, fewer than the input's ${inputPartitions}: ` +
        why,
    );
  };
  await partitioned(
    'output.topic',
    output,
    'each record is written to its input partition number, to keep its order',
  );
  if (!existing.has(dlq)) await admin.createTopics([{ topic: dlq }]);
  if (audit !== undefined) {
    if (audit === input || audit === output || audit === dlq) {
      throw new ConfigError(
        'output.duplicatesTopic',
        `topic ${JSON.stringify(audit)} is also the input, output or DLQ topic: the audit of duplicates needs its own`,
      );
    }
    await partitioned(
      'output.duplicatesTopic',
      audit,
      'each audit record is written to its input partition number',
    );
  }
  if (changelog !== undefined) {
    const spec = { ...changelog, partitions: inputPartitions, configKey: 'changelog.topic' };
    // Checked when it exists: asking kafkajs to create an existing topic logs an error line.
    if (existing.has(changelog.topic)) await checkChangelogTopic(admin, spec);
    else await ensureChangelogTopic(admin, spec);
  }
  return maxMessageBytes(admin, output);
}

async function maxMessageBytes(admin: KafkaAdmin, topic: string): Promise<OutputLimit> {
  const assumed = { maxBatchBytes: DEFAULT_MAX_MESSAGE_BYTES, known: false };
  try {
    const configs = await admin.describeTopicConfigs(topic, ['max.message.bytes']);
    const value = Number(configs.get('max.message.bytes'));
    return Number.isFinite(value) && value > 0 ? { maxBatchBytes: value, known: true } : assumed;
  } catch {
    return assumed;
  }
}
