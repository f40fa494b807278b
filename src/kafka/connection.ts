import { z } from 'zod';
import { tlsSettingSchema } from '../options/tls.js';
import { durationMs } from '../util/duration.js';
import { defaultKafkaClient, kafkaClientNames } from './port/names.js';

// How to reach a cluster (node and `kafka` store keys); validating it loads no client library.

export const kafkaConnectionDefaults = {
  /** The node's client id; the `kafka` repository has its own (`kafkaDefaults.clientId`). */
  clientId: 'idem-node',
  /** How long a killed or stuck group member keeps its partitions; the broker's minimum is 6 s. */
  sessionTimeoutMs: 10_000,
  connectionTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  /** The node's bound on its start (brokers reached, topics checked, group joined): past it, exit code 3. */
  startupTimeoutMs: 30_000,
} as const;

export const kafkaSaslSchema = z
  .object({
    mechanism: z.enum(['plain', 'scram-sha-256', 'scram-sha-512']),
    username: z.string().min(1),
    password: z.string(),
    /** Send SASL over a connection without TLS anyway (credentials and records unencrypted on the wire). */
    allowPlaintext: z.boolean().default(false),
  })
  .strict();

export type KafkaSasl = z.output<typeof kafkaSaslSchema>;

/** The connection keys every Kafka table shares, each validated the same way wherever it appears. */
export const kafkaConnectionFields = {
  brokers: z.array(z.string().min(1)).min(1),
  /** The client library behind the Kafka port (src/kafka/port): kafkajs, or `@platformatic/kafka`. */
  client: z.enum(kafkaClientNames).default(defaultKafkaClient),
  /** `true` for TLS with the system CAs, or a table of TLS settings. */
  ssl: tlsSettingSchema.default(false),
  sasl: kafkaSaslSchema.optional(),
  connectionTimeout: durationMs.default(kafkaConnectionDefaults.connectionTimeoutMs),
  requestTimeout: durationMs.default(kafkaConnectionDefaults.requestTimeoutMs),
};

/** Refuses SASL over plaintext unless allowed: `table` is the keys' table, `sent` what else is sent. */
export function saslNeedsTls(table: string, sent: string) {
  return (connection: { sasl?: KafkaSasl | undefined; ssl: unknown }, ctx: z.RefinementCtx): void => {
    if (connection.sasl && connection.ssl === false && !connection.sasl.allowPlaintext) {
      ctx.addIssue({
        code: 'custom',
        path: ['sasl'],
        params: { quoteValue: false },
        message:
          `SASL without TLS sends the login and every ${sent} unencrypted; set ${table}.ssl = true (or a table ` +
          `with ca = ...), or ${table}.sasl.allowPlaintext = true if the network is trusted`,
      });
    }
  };
}

/** The dedup node's `[kafka]` table: how to reach the cluster (shared by input, output and DLQ). */
export const kafkaConnectionSchema = z
  .object({
    ...kafkaConnectionFields,
    clientId: z.string().min(1).default(kafkaConnectionDefaults.clientId),
    sessionTimeout: durationMs.default(kafkaConnectionDefaults.sessionTimeoutMs),
    startupTimeout: durationMs.default(kafkaConnectionDefaults.startupTimeoutMs),
  })
  .strict()
  .superRefine(saslNeedsTls('kafka', 'record'));

export type KafkaConnection = z.output<typeof kafkaConnectionSchema>;
