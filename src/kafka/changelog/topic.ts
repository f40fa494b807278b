import { ConfigError } from '../../errors.js';
import type { KafkaAdmin } from '../port/index.js';

/** What {@link ensureChangelogTopic} creates or checks. */
export interface ChangelogTopicSpec {
  readonly topic: string;
  /** The partition count it must have (the node's: the input topic's, partition p for input partition p). */
  readonly partitions: number;
  /** How long marks must be kept (the dedup window). */
  readonly retentionMs: number;
  /** The config key that names the topic (or the window), quoted in errors. */
  readonly configKey: string;
  /** Replication factor of a created topic; default -1, the broker's default.replication.factor. */
  readonly replicationFactor?: number;
  /**
   * Its records are packs (keys never repeated, see `packKey`): only `delete` with a finite `retention.ms` ever
   * removes them, so an existing topic must have both or it grows without bound.
   */
  readonly packed?: boolean;
}

/** Creates the changelog topic (`compact,delete`, window's `retention.ms`) or checks it; true if created. */
export async function ensureChangelogTopic(admin: KafkaAdmin, spec: ChangelogTopicSpec): Promise<boolean> {
  const { topic, partitions, retentionMs, configKey } = spec;
  if (!Number.isSafeInteger(partitions) || partitions < 1) {
    throw new ConfigError(
      configKey,
      `changelog topic "${topic}": partition count must be a positive integer`,
    );
  }
  const created = await admin.createTopics([
    {
      topic,
      numPartitions: partitions,
      replicationFactor: spec.replicationFactor ?? -1,
      configEntries: [
        { name: 'cleanup.policy', value: 'compact,delete' },
        { name: 'retention.ms', value: String(Math.ceil(retentionMs)) },
      ],
    },
  ]);
  if (created) return true;
  await checkChangelogTopic(admin, spec);
  return false;
}

/**
 * A wrong partition count, a policy without `compact` or a retention below the window is a ConfigError naming the
 * topic and `configKey`: reading such a topic would restore the wrong marks or too few. So is a packed changelog
 * that nothing deletes (see {@link ChangelogTopicSpec.packed}).
 */
export async function checkChangelogTopic(admin: KafkaAdmin, spec: ChangelogTopicSpec): Promise<void> {
  const { topic, partitions, retentionMs, configKey } = spec;
  const found = (await admin.topicPartitions(topic)).length;
  if (found !== partitions) {
    throw new ConfigError(
      configKey,
      `changelog topic "${topic}" has ${found} partitions, but it must have ${partitions} (one per input ` +
        'partition); name another changelog topic, or delete this one so it is created again',
    );
  }
  const entries = await admin.describeTopicConfigs(topic, ['cleanup.policy', 'retention.ms']);
  const policy = (entries.get('cleanup.policy') ?? 'delete').split(',').map((s) => s.trim());
  if (!policy.includes('compact')) {
    throw new ConfigError(
      configKey,
      `changelog topic "${topic}" has cleanup.policy=${policy.join(',')}, but it must be compacted ` +
        `(cleanup.policy=compact,delete): fix the topic's config or name another changelog topic`,
    );
  }
  const retention = Number(entries.get('retention.ms') ?? -1);
  if (spec.packed === true && (!policy.includes('delete') || retention < 0)) {
    throw new ConfigError(
      configKey,
      `changelog topic "${topic}" has cleanup.policy=${policy.join(',')} and retention.ms=${retention}, but ` +
        "exactly-once writes each chunk's marks as one record under a new key, which compaction never removes: " +
        "it needs cleanup.policy=compact,delete and a finite retention.ms; fix the topic's config or name another " +
        'changelog topic',
    );
  }
  if (policy.includes('delete') && retention >= 0 && retention < retentionMs) {
    throw new ConfigError(
      configKey,
      `changelog topic "${topic}" has retention.ms=${retention}, shorter than the ${Math.ceil(retentionMs)} ms ` +
        "its marks must be kept: raise the topic's retention.ms or name another changelog topic",
    );
  }
}
