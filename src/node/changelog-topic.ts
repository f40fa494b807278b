import { checkChangelogTopic, ensureChangelogTopic } from '../kafka/changelog/index.js';
import type { KafkaClient } from '../kafka/port/index.js';
import { untilAborted } from './abort.js';
import { changelogEnabled, changelogTopic, type NodeConfig } from './options.js';

/**
 * The node's changelog topic, when the config turns it on: created with the input's partition count (changelog
 * partition p holds input partition p's marks), or checked when it exists. Undefined when off.
 */
export async function prepareChangelogTopic(
  kafka: KafkaClient,
  config: NodeConfig,
  inputPartitions: number,
  signal?: AbortSignal,
): Promise<string | undefined> {
  if (!changelogEnabled(config)) return undefined;
  const topic = changelogTopic(config);
  const admin = kafka.admin();
  const spec = {
    topic,
    partitions: inputPartitions,
    retentionMs: config.dedup.window,
    configKey: 'changelog.topic',
  };
  try {
    await untilAborted(
      // Checked when it exists: asking kafkajs to create an existing topic logs an error line.
      admin
        .connect()
        .then(() => admin.listTopics())
        .then(async (topics) => {
          if (topics.includes(topic)) await checkChangelogTopic(admin, spec);
          else await ensureChangelogTopic(admin, spec);
        }),
      signal,
    );
  } finally {
    await admin.disconnect();
  }
  return topic;
}
