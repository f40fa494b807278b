// The client names, apart from the rest of the port: the connection schema (src/kafka/connection.ts) validates
// `kafka.client` with them, and the port's types import that schema's types.

/** The Kafka client libraries the port has an implementation for (config key `kafka.client`). */
export const kafkaClientNames = ['kafkajs', 'platformatic'] as const;

/** One of {@link kafkaClientNames}. */
export type KafkaClientName = (typeof kafkaClientNames)[number];

/**
 * The client the package uses unless told otherwise: `@platformatic/kafka`, an optional dependency the default
 * install carries (maintained; fences zombies by the group, KIP-447). kafkajs (no release since February 2023)
 * stays supported with `kafka.client = "kafkajs"`.
 */
export const defaultKafkaClient: KafkaClientName = 'platformatic';
