// The client names, apart from the rest of the port: the connection schema (src/kafka/connection.ts) validates
// `kafka.client` with them, and the port's types import that schema's types.

/** The Kafka client libraries the port has an implementation for (config key `kafka.client`). */
export const kafkaClientNames = ['kafkajs', 'platformatic'] as const;

/** One of {@link kafkaClientNames}. */
export type KafkaClientName = (typeof kafkaClientNames)[number];

/** The client the package uses unless told otherwise. */
export const defaultKafkaClient: KafkaClientName = 'kafkajs';
