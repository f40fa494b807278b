import { z } from 'zod';
import { idSourceSchema } from '../adapters/kafka/message-id.js';
import { configSections } from '../config/sections.js';
import { durationMs } from '../util/duration.js';

/** Defaults of the dedup node, written once. */
export const nodeDefaults = {
  clientId: 'idem-node',
  groupId: 'idem-dedup',
  batchSize: 1000,
  batchTimeoutMs: 1_000,
  windowMs: 3 * 3_600_000,
  missingId: 'dlq',
  metricsPort: 8000,
  metricsHost: '0.0.0.0',
  perfIntervalMs: 10_000,
  sessionTimeoutMs: 10_000,
} as const;

const saslSchema = z
  .object({
    mechanism: z.enum(['plain', 'scram-sha-256', 'scram-sha-512']),
    username: z.string().min(1),
    password: z.string(),
  })
  .strict();

/** `[kafka]`: how to reach the cluster (shared by input, output and DLQ). */
export const kafkaConnectionSchema = z
  .object({
    brokers: z.array(z.string().min(1)).min(1),
    clientId: z.string().min(1).default(nodeDefaults.clientId),
    ssl: z.boolean().default(false),
    sasl: saslSchema.optional(),
    /** How long a killed or stuck member keeps its partitions; the broker's minimum is 6 s. */
    sessionTimeout: durationMs.default(nodeDefaults.sessionTimeoutMs),
  })
  .strict();

/**
 * The dedup node's config file (`idem node --config node.toml`). Env overrides use `IDEM__SECTION__KEY`, e.g.
 * `IDEM__METRICS__ENABLED=false`, `IDEM__INPUT__TOPIC=raw`.
 */
export const nodeConfigSchema = z
  .object({
    repository: configSections.repository,
    kafka: kafkaConnectionSchema,
    input: z
      .object({
        topic: z.string().min(1),
        groupId: z.string().min(1).default(nodeDefaults.groupId),
        /** Most records handled per store round trip and per output send. */
        batchSize: z.number().int().min(1).default(nodeDefaults.batchSize),
        /** Longest wait for a fetch to fill before the node works on what it has. */
        batchTimeout: durationMs.default(nodeDefaults.batchTimeoutMs),
        fromBeginning: z.boolean().default(true),
      })
      .strict(),
    output: z.object({ topic: z.string().min(1) }).strict(),
    dlq: z.object({ topic: z.string().min(1) }).strict(),
    dedup: z
      .object({
        /** Where the dedup field is: `{ from = "value", path = "uid" }`, `{ from = "key" }` or a header. */
        id: idSourceSchema,
        /** How long an id stays a duplicate (processing time); this is the consumer's TTL. */
        window: durationMs.default(nodeDefaults.windowMs),
        /** A record without the dedup field: dead-letter it (default) or forward it undeduplicated (KIP-655). */
        missingId: z.enum(['dlq', 'forward']).default(nodeDefaults.missingId),
        /** Store down: `fail` stops the batch (nothing committed, retried); `process` forwards records as new. */
        storeFailure: z.enum(['fail', 'process']).default('fail'),
      })
      .strict(),
    metrics: z
      .object({
        enabled: z.boolean().default(true),
        port: z.number().int().min(0).max(65_535).default(nodeDefaults.metricsPort),
        host: z.string().default(nodeDefaults.metricsHost),
      })
      .strict()
      .prefault({}),
    perf: z
      .object({ interval: durationMs.default(nodeDefaults.perfIntervalMs) })
      .strict()
      .prefault({}),
  })
  .strict();

/** Parsed node config. */
export type NodeConfig = z.output<typeof nodeConfigSchema>;
