import { z } from 'zod';
import { kafkaConnectionDefaults, kafkaConnectionFields, saslNeedsTls } from '../../kafka/connection.js';
import { durationMs } from '../../util/duration.js';
import { renamedKey } from '../../util/renamed-key.js';
import { memoryDefaults } from '../memory/options.js';
import { storeOptionsParser } from '../shared.js';

export const kafkaDefaults = {
  clientId: 'idem-repository',
  /** One partition keeps every id's writes in one total order; raise it for write throughput. */
  partitions: 1,
  /** -1: the broker's default.replication.factor. */
  replicationFactor: -1,
  /** How long the topic keeps a mark (its `retention.ms`); also the longest TTL the store accepts (`maxTtlMs`). */
  ttlMs: 7 * 86_400_000,
  /** @deprecated Renamed {@link kafkaDefaults.ttlMs} (`ttl` is the retention's one name in config and code). */
  retentionMs: 7 * 86_400_000,
  /** Bound of the local index (the memory store's LRU); size it above the ids live at once. */
  maxEntries: memoryDefaults.maxEntries,
  connectionTimeoutMs: kafkaConnectionDefaults.connectionTimeoutMs,
  requestTimeoutMs: kafkaConnectionDefaults.requestTimeoutMs,
} as const;

/** Config schema for `repository.type = "kafka"`. */
export const kafkaOptionsSchema = z
  .object({
    // The connection keys mean what they mean in the node's `[kafka]` table, validated by the same schemas.
    brokers: kafkaConnectionFields.brokers,
    client: kafkaConnectionFields.client,
    /** The compacted topic that holds the marks; created when missing, checked when present. */
    topic: z
      .string()
      .regex(
        /^[a-zA-Z0-9._-]{1,249}$/,
        'must be a Kafka topic name: 1 to 249 of a-z, A-Z, 0-9, ".", "_", "-"',
      ),
    partitions: z.number().int().positive().default(kafkaDefaults.partitions),
    replicationFactor: z
      .number()
      .int()
      .min(-1)
      .refine((n) => n !== 0, 'must be -1 (the broker default) or at least 1')
      .default(kafkaDefaults.replicationFactor),
    ttl: durationMs.optional(),
    /** The older name of `ttl`, still accepted. */
    retention: durationMs.optional(),
    maxEntries: z.number().int().positive().default(kafkaDefaults.maxEntries),
    clientId: z.string().min(1).default(kafkaDefaults.clientId),
    ssl: kafkaConnectionFields.ssl,
    sasl: kafkaConnectionFields.sasl,
    connectionTimeout: durationMs.default(kafkaDefaults.connectionTimeoutMs),
    requestTimeout: durationMs.default(kafkaDefaults.requestTimeoutMs),
  })
  .strict()
  .superRefine(saslNeedsTls('repository', 'mark'))
  .transform(renamedKey('ttl', 'retention', kafkaDefaults.ttlMs));

/** @deprecated Renamed {@link kafkaDefaults} (every store's defaults are `<store>Defaults`). */
export const kafkaRepositoryDefaults = kafkaDefaults;

export type KafkaOptions = z.output<typeof kafkaOptionsSchema>;

/** Options of {@link KafkaRepository.open}: the config table plus an injectable clock. */
export type KafkaRepositoryOptions = z.input<typeof kafkaOptionsSchema> & { clock?: () => number };

export const parseKafkaOptions = storeOptionsParser(kafkaOptionsSchema, 'KafkaRepository.open(...)');
