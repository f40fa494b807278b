// Apart from the port's types, which import the connection schema (connection.ts) that validates these names.

/** The Kafka client libraries the port has an implementation for (config key `kafka.client`). */
export const kafkaClientNames = ['kafkajs', 'platformatic'] as const;

export type KafkaClientName = (typeof kafkaClientNames)[number];

/**
 * The default: `@platformatic/kafka`, an optional dependency the default install carries (maintained; fences
 * zombies by the group, KIP-447). kafkajs (no release since February 2023) stays supported.
 */
export const defaultKafkaClient: KafkaClientName = 'platformatic';
