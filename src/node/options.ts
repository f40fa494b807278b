import { z } from 'zod';
import { configSections } from '../config/sections.js';
import { replayEpochConfigSchema } from '../consumer/options.js';
import { kafkaConnectionSchema } from '../kafka/connection.js';
import { type IdSource, idSourceSchema } from '../kafka/index.js';
import { MAX_TTL_MS } from '../store/ttl.js';
import { durationMs, durationSchema } from '../util/duration.js';
import { renamedKey } from '../util/renamed-key.js';
import { catchUpSchema } from './catch-up.js';

/** The node's defaults; docs/node.md's table says what each key does. */
export const nodeDefaults = {
  groupId: 'idem-dedup',
  batchSize: 1000,
  batchTimeoutMs: 1_000,
  maxBytesPerPartition: 4 * 1024 * 1024,
  maxBytes: 16 * 1024 * 1024,
  ttlMs: 3 * 3_600_000,
  missingId: 'dlq',
  storeFailure: 'fail',
  sendAttempts: 5,
  retryBackoffMs: 500,
  metricsPort: 8000,
  metricsHost: '127.0.0.1',
  perfIntervalMs: 10_000,
  shutdownTimeoutMs: 30_000,
  /** Kafka's default `transaction.timeout.ms`. */
  transactionTimeoutMs: 60_000,
  /**
   * Per-instance: only this timeout ends a crashed instance's open transaction, which holds back the stable offset
   * of what it wrote to. On @platformatic/kafka (which also sends it as its request timeout) 10–15 s measured
   * 0.6–0.76× the records/s of 30–60 s.
   */
  instanceTransactionTimeoutMs: 30_000,
} as const;

/** What an instance id may be: it is part of a transactional id, and of a file's contents. */
export const INSTANCE_ID = /^[A-Za-z0-9._-]{1,100}$/;

/** `id = "uid"` is short for `id = { from = "value", path = "uid" }`. */
const dedupIdSchema = z.union(
  [z.string().transform((path): IdSource => ({ from: 'value', path })), idSourceSchema],
  { error: 'must be a field path ("uid") or a table such as { from = "key" }' },
);

/** The dedup node's config file (`idem node --config node.toml`; `IDEM__SECTION__KEY` overrides). See docs/node.md. */
export const nodeConfigSchema = z
  .object({
    repository: configSections.repository,
    kafka: kafkaConnectionSchema,
    input: z
      .object({
        topic: z.string().min(1),
        groupId: z.string().min(1).default(nodeDefaults.groupId),
        batchSize: z.number().int().min(1).default(nodeDefaults.batchSize),
        batchTimeout: durationMs.default(nodeDefaults.batchTimeoutMs),
        fromBeginning: z.boolean().default(true),
        maxBytesPerPartition: z.number().int().min(1024).default(nodeDefaults.maxBytesPerPartition),
        maxBytes: z.number().int().min(1024).default(nodeDefaults.maxBytes),
      })
      .strict(),
    output: z
      .object({
        topic: z.string().min(1),
        sendAttempts: z.number().int().min(1).default(nodeDefaults.sendAttempts),
        retryBackoff: durationMs.default(nodeDefaults.retryBackoffMs),
        guarantee: z.enum(['at-least-once', 'exactly-once']).default('at-least-once'),
        transactionalIdPrefix: z.string().min(1).optional(),
        transactionalProducer: z.enum(['per-partition', 'per-instance']).optional(),
        instanceId: z.string().regex(INSTANCE_ID, 'letters, digits, ".", "_" or "-", at most 100').optional(),
        transactionTimeout: durationMs.optional(),
        duplicatesTopic: z.string().min(1).optional(),
      })
      .strict(),
    changelog: z
      .object({
        enabled: z.boolean().optional(),
        topic: z.string().min(1).optional(),
        checkpoint: z.string().min(1).optional(),
      })
      .strict()
      .prefault({}),
    dlq: z.object({ topic: z.string().min(1) }).strict(),
    dedup: z
      .object({
        id: dedupIdSchema,
        ttl: durationSchema({ max: MAX_TTL_MS }).optional(),
        window: durationSchema({ max: MAX_TTL_MS }).optional(),
        missingId: z.enum(['dlq', 'forward']).default(nodeDefaults.missingId),
        storeFailure: z.enum(['fail', 'process']).default(nodeDefaults.storeFailure),
        replayEpoch: replayEpochConfigSchema.optional(),
      })
      .strict()
      .transform(renamedKey('ttl', 'window', nodeDefaults.ttlMs)),
    metrics: z
      .object({
        enabled: z.boolean().default(true),
        port: z.number().int().min(0).max(65_535).default(nodeDefaults.metricsPort),
        host: z.string().min(1).default(nodeDefaults.metricsHost),
      })
      .strict()
      .prefault({}),
    perf: z
      .object({ interval: durationMs.default(nodeDefaults.perfIntervalMs) })
      .strict()
      .prefault({}),
    shutdown: z
      .object({ timeout: durationMs.default(nodeDefaults.shutdownTimeoutMs) })
      .strict()
      .prefault({}),
    catchUp: catchUpSchema,
  })
  .strict()
  .superRefine((config, ctx) => {
    const refuse = (path: string[], message: string) =>
      ctx.addIssue({ code: 'custom', path, params: { quoteValue: false }, message });
    if (config.output.transactionalProducer === 'per-instance' && config.kafka.client !== 'platformatic') {
      refuse(
        ['output', 'transactionalProducer'],
        '"per-instance" needs kafka.client = "platformatic": kafkajs sends no group generation with a ' +
          "transaction's offsets, so the group could not fence a zombie",
      );
    }
    if (config.output.guarantee === 'exactly-once' && config.changelog.enabled === false) {
      refuse(
        ['changelog', 'enabled'],
        'output.guarantee = "exactly-once" keeps its dedup state in the changelog: it cannot be disabled',
      );
    }
    // The changelog topic must be the node's alone: it is compacted and keyed like the marks, so an audit record
    // (keyed by the dedup id) would replace a forwarded id's mark, and other records would be read back as marks.
    const topic = changelogTopic(config);
    if (topic === undefined) return;
    const others = {
      'input.topic': config.input.topic,
      'output.topic': config.output.topic,
      'dlq.topic': config.dlq.topic,
    };
    const clash = Object.entries(others).find(([, other]) => other === topic);
    if (clash) {
      refuse(
        ['changelog', 'topic'],
        `topic ${JSON.stringify(topic)} is also ${clash[0]}: the changelog needs a topic of its own`,
      );
    }
    if (config.output.duplicatesTopic === topic) {
      refuse(
        ['output', 'duplicatesTopic'],
        `topic ${JSON.stringify(topic)} is also the changelog topic: audit records are keyed like the marks, ` +
          "so compaction would replace a forwarded id's mark with one",
      );
    }
  });

export type NodeConfig = z.output<typeof nodeConfigSchema>;

/** The node config as written in a file or passed in code, before defaults. */
export type NodeConfigInput = z.input<typeof nodeConfigSchema>;

/** The node's topics, as the node checks (and creates) them before it starts. */
export function nodeTopics(config: NodeConfig) {
  const changelog = changelogTopic(config);
  return {
    input: config.input.topic,
    output: config.output.topic,
    dlq: config.dlq.topic,
    /** `output.duplicatesTopic` (undefined: off). */
    audit: config.output.duplicatesTopic,
    /**
     * The changelog and its retention (`dedup.ttl`); undefined: the node keeps none. `packed`: exactly-once writes
     * a chunk's marks as one record under a key of its own, which compaction never drops.
     */
    changelog:
      changelog === undefined
        ? undefined
        : {
            topic: changelog,
            retentionMs: config.dedup.ttl,
            packed: config.output.guarantee === 'exactly-once',
          },
  };
}

export type NodeTopics = ReturnType<typeof nodeTopics>;

/** The changelog topic (always under exactly-once, else opt-in); default name as Kafka Streams'. */
function changelogTopic(config: Pick<NodeConfig, 'input' | 'output' | 'changelog'>): string | undefined {
  if (!(config.changelog.enabled ?? config.output.guarantee === 'exactly-once')) return undefined;
  return config.changelog.topic ?? `${config.input.groupId}-${config.output.topic}-changelog`;
}

/**
 * The files that keep the node's local state across restarts: the changelog checkpoint (configured, or beside a
 * RocksDB store: it must never claim marks a store lost) and the instance id (beside the store, else the checkpoint).
 */
export function localFiles(config: Pick<NodeConfig, 'repository' | 'changelog'>) {
  const { type, path } = config.repository as { type?: string; path?: string };
  const store = type === 'rocksdb' && path ? path : undefined;
  const { checkpoint } = config.changelog;
  const beside = store ?? checkpoint;
  return {
    checkpoint: checkpoint ?? (store && `${store}.changelog.json`),
    instanceId: beside && `${beside}.instance-id`,
  };
}
