import { z } from 'zod';
import { configSections } from '../config/sections.js';
import { replayEpochConfigSchema } from '../consumer/options.js';
import { kafkaConnectionDefaults, kafkaConnectionSchema } from '../kafka/connection.js';
import { type IdSource, idSourceSchema } from '../kafka/index.js';
import { MAX_TTL_MS } from '../store/ttl.js';
import { durationMs, durationSchema } from '../util/duration.js';
import { catchUpSchema } from './catch-up.js';

/** Defaults of the dedup node, written once. */
export const nodeDefaults = {
  clientId: kafkaConnectionDefaults.clientId,
  groupId: 'idem-dedup',
  /** Records per store round trip and per output request; also the most records one crash can repeat. */
  batchSize: 1000,
  batchTimeoutMs: 1_000,
  /** Fetch sizes: larger fetches mean fewer round trips, and the node commits once per fetched batch. */
  maxBytesPerPartition: 4 * 1024 * 1024,
  maxBytes: 16 * 1024 * 1024,
  windowMs: 3 * 3_600_000,
  missingId: 'dlq',
  storeFailure: 'fail',
  /** Tries of one output request whose error may pass (broker away, leader moving) before the batch is retried. */
  sendAttempts: 5,
  retryBackoffMs: 500,
  metricsPort: 8000,
  /** Loopback: the metrics page has no authentication; `metrics.host = "0.0.0.0"` opens it to the network. */
  metricsHost: '127.0.0.1',
  perfIntervalMs: 10_000,
  sessionTimeoutMs: kafkaConnectionDefaults.sessionTimeoutMs,
  connectionTimeoutMs: kafkaConnectionDefaults.connectionTimeoutMs,
  requestTimeoutMs: kafkaConnectionDefaults.requestTimeoutMs,
  /** Longest graceful stop (finish the batch, commit, flush); past it the process exits with code 1. */
  shutdownTimeoutMs: 30_000,
  /** Kafka's default `transaction.timeout.ms` for a producer: a transaction left open by a crash is aborted after it. */
  transactionTimeoutMs: 60_000,
  /**
   * Per-instance exactly-once: nothing but this timeout ends the open transaction of an instance that crashed
   * and does not come back, and until then it holds back the last stable offset of the output and changelog
   * partitions it wrote to. Kafka Streams uses 10 s; on @platformatic/kafka 10–15 s measured 0.6–0.76× the
   * records/s of 30–60 s (the library also sends it as its request timeout), so 30 s.
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

/**
 * The dedup node's config file (`idem node --config node.toml`). Env overrides use
 * `IDEM__SECTION__KEY`, e.g. `IDEM__METRICS__ENABLED=false`, `IDEM__INPUT__TOPIC=raw`. See docs/node.md.
 */
export const nodeConfigSchema = z
  .object({
    repository: configSections.repository,
    kafka: kafkaConnectionSchema,
    input: z
      .object({
        topic: z.string().min(1),
        groupId: z.string().min(1).default(nodeDefaults.groupId),
        /** Most records handled per store round trip and per output request. */
        batchSize: z.number().int().min(1).default(nodeDefaults.batchSize),
        /** Longest wait of one fetch on a drained topic before the node polls again. */
        batchTimeout: durationMs.default(nodeDefaults.batchTimeoutMs),
        /** A group without committed offsets starts at the earliest record (true) or at the end (false). */
        fromBeginning: z.boolean().default(true),
        maxBytesPerPartition: z.number().int().min(1024).default(nodeDefaults.maxBytesPerPartition),
        maxBytes: z.number().int().min(1024).default(nodeDefaults.maxBytes),
      })
      .strict(),
    output: z
      .object({
        topic: z.string().min(1),
        /** Tries of one request that fails with a passing error, before the fetched batch is retried from scratch. */
        sendAttempts: z.number().int().min(1).default(nodeDefaults.sendAttempts),
        /** First wait between tries, doubled each time. */
        retryBackoff: durationMs.default(nodeDefaults.retryBackoffMs),
        /**
         * `at-least-once` (default): a crash may repeat one chunk in the output. `exactly-once`: one Kafka
         * transaction per span of up to 10 chunks holds their output, changelog marks and input offset.
         */
        guarantee: z.enum(['at-least-once', 'exactly-once']).default('at-least-once'),
        /**
         * Exactly-once: transactional ids are `<prefix>-<input topic>-<partition>` (one producer per partition) or
         * `<prefix>-<input topic>-instance-<instance id>` (one per instance); the prefix defaults to the group id.
         */
        transactionalIdPrefix: z.string().min(1).optional(),
        /**
         * Exactly-once: `per-partition` (one transactional producer per owned input partition, fenced by its id)
         * or `per-instance` (one producer per instance, fenced by the consumer group's generation: KIP-447, Kafka
         * Streams' EOS v2; needs a client that sends the generation, `kafka.client = "platformatic"`). Default:
         * per-instance on a client that can, per-partition otherwise.
         */
        transactionalProducer: z.enum(['per-partition', 'per-instance']).optional(),
        /**
         * Exactly-once, per-instance: this instance's name in its transactional id. It must be stable across
         * restarts (a restarted instance then aborts its own open transaction at once) and unique in the group.
         * Default: a random id kept in a file beside the local store (`<path>.instance-id`), or a new one per
         * process when the store keeps nothing on disk.
         */
        instanceId: z.string().regex(INSTANCE_ID, 'letters, digits, ".", "_" or "-", at most 100').optional(),
        /**
         * Exactly-once: the broker aborts a transaction left open this long (a crashed owner's). Default 60 s
         * per-partition, 30 s per-instance ({@link transactionTimeoutMs}).
         */
        transactionTimeout: durationMs.optional(),
        /**
         * Off by default. One JSON record per suppressed duplicate (id, input topic/partition/offset, first-seen
         * time), partition p for input partition p; created like the output topic when missing. See duplicates.ts.
         */
        duplicatesTopic: z.string().min(1).optional(),
      })
      .strict(),
    /**
     * The changelog: a compacted topic holding each forwarded id's mark, partition p for input partition p, so
     * the dedup state follows its partition to whichever instance owns it. See docs/node.md.
     */
    changelog: z
      .object({
        /** Required (and the default) under exactly-once; off by default under at-least-once. */
        enabled: z.boolean().optional(),
        /** Default: `<group id>-<output topic>-changelog`. */
        topic: z.string().min(1).optional(),
        /**
         * The checkpoint file (the changelog offset the local store has applied, per partition). Default: beside a
         * RocksDB store (`<path>.changelog.json`); none for other stores (each restore reads from the start).
         */
        checkpoint: z.string().min(1).optional(),
      })
      .strict()
      .prefault({}),
    dlq: z.object({ topic: z.string().min(1) }).strict(),
    dedup: z
      .object({
        /** The dedup field: a dotted path into the JSON value (`"uid"`), or `{ from = "key" }` / a header. */
        id: dedupIdSchema,
        /**
         * How long an id stays a duplicate, from when the node forwarded it (processing time): the TTL of its
         * marks and the changelog's retention, so the TTL rule bounds it (at most 100 years; the node also checks
         * its store's own maximum before it touches a topic).
         */
        window: durationSchema({ max: MAX_TTL_MS }).default(nodeDefaults.windowMs),
        /** A record without the dedup field: dead-letter it (default) or forward it undeduplicated (KIP-655). */
        missingId: z.enum(['dlq', 'forward']).default(nodeDefaults.missingId),
        /** Store down: `fail` retries the batch (nothing forwarded or committed); `process` forwards as new. */
        storeFailure: z.enum(['fail', 'process']).default(nodeDefaults.storeFailure),
        /** A deliberate replay: ids are kept per epoch (the consumer's `replayEpoch`; docs/operations.md). */
        replayEpoch: replayEpochConfigSchema.optional(),
      })
      .strict(),
    metrics: z
      .object({
        enabled: z.boolean().default(true),
        port: z.number().int().min(0).max(65_535).default(nodeDefaults.metricsPort),
        /** Interface `/metrics` listens on; loopback unless opened on purpose (`"0.0.0.0"`). */
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
    /** Fast catch-up of a partition found far behind (src/node/catch-up.ts). */
    catchUp: catchUpSchema,
  })
  .strict()
  .superRefine((config, ctx) => {
    if (config.output.transactionalProducer === 'per-instance' && config.kafka.client !== 'platformatic') {
      ctx.addIssue({
        code: 'custom',
        path: ['output', 'transactionalProducer'],
        params: { quoteValue: false },
        message:
          '"per-instance" needs kafka.client = "platformatic": kafkajs sends no group generation with a ' +
          "transaction's offsets, so the group could not fence a zombie",
      });
    }
    if (config.output.guarantee === 'exactly-once' && config.changelog.enabled === false) {
      ctx.addIssue({
        code: 'custom',
        path: ['changelog', 'enabled'],
        params: { quoteValue: false },
        message:
          'output.guarantee = "exactly-once" keeps its dedup state in the changelog: it cannot be disabled',
      });
    }
    refuseSharedChangelogTopic(config, ctx);
  });

/**
 * The changelog topic must be the node's alone: it is compacted and keyed like the marks, so an audit record
 * (keyed by the dedup id) would replace a forwarded id's mark, and other records would be read back as marks.
 */
function refuseSharedChangelogTopic(
  config: ChangelogSettings & {
    output: { duplicatesTopic?: string | undefined };
    dlq: { topic: string };
  },
  ctx: z.RefinementCtx,
): void {
  if (!changelogEnabled(config)) return;
  const topic = changelogTopic(config);
  const others: [string, string][] = [
    ['input.topic', config.input.topic],
    ['output.topic', config.output.topic],
    ['dlq.topic', config.dlq.topic],
  ];
  const clash = others.find(([, other]) => other === topic);
  if (clash) {
    ctx.addIssue({
      code: 'custom',
      path: ['changelog', 'topic'],
      params: { quoteValue: false },
      message: `topic ${JSON.stringify(topic)} is also ${clash[0]}: the changelog needs a topic of its own`,
    });
  }
  if (config.output.duplicatesTopic === topic) {
    ctx.addIssue({
      code: 'custom',
      path: ['output', 'duplicatesTopic'],
      params: { quoteValue: false },
      message:
        `topic ${JSON.stringify(topic)} is also the changelog topic: audit records are keyed like the marks, ` +
        "so compaction would replace a forwarded id's mark with one",
    });
  }
}

/** Parsed node config. */
export type NodeConfig = z.output<typeof nodeConfigSchema>;

/** The node config as written in a file or passed in code, before defaults. */
export type NodeConfigInput = z.input<typeof nodeConfigSchema>;

/** The parts of a node config that say whether there is a changelog, and its topic. */
interface ChangelogSettings {
  readonly input: { readonly topic: string; readonly groupId: string };
  readonly output: { readonly topic: string; readonly guarantee: string };
  readonly changelog: { readonly enabled?: boolean | undefined; readonly topic?: string | undefined };
}

/** Whether the node writes (and restores from) the changelog: always under exactly-once, opt-in otherwise. */
export function changelogEnabled(config: ChangelogSettings): boolean {
  return config.changelog.enabled ?? config.output.guarantee === 'exactly-once';
}

/** The changelog topic: configured, or `<group id>-<output topic>-changelog` (Kafka Streams' naming). */
export function changelogTopic(config: ChangelogSettings): string {
  return config.changelog.topic ?? `${config.input.groupId}-${config.output.topic}-changelog`;
}

/** The transactional id of input partition `partition`'s producer: `<prefix>-<input topic>-<partition>`. */
export function transactionalId(config: TransactionalIdSettings, partition: number): string {
  return `${transactionalIdBase(config)}-${partition}`;
}

/** The transactional id of an instance's one producer: `<prefix>-<input topic>-instance-<instance id>`. */
export function instanceTransactionalId(config: TransactionalIdSettings, instanceId: string): string {
  return `${transactionalIdBase(config)}-instance-${instanceId}`;
}

/** What names a transactional id: the prefix (default: the group id) and the input topic. */
export type TransactionalIdSettings = Pick<NodeConfig, 'input' | 'output'>;

function transactionalIdBase(config: TransactionalIdSettings): string {
  return `${config.output.transactionalIdPrefix ?? config.input.groupId}-${config.input.topic}`;
}
