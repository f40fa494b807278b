// Apart from the port's types, which import the connection schema (connection.ts) that validates these names.

/** The Kafka client libraries the port has an implementation for (config key `kafka.client`). */
export const kafkaClientNames = ['kafkajs', 'platformatic'] as const;

export type KafkaClientName = (typeof kafkaClientNames)[number];

/** The default: `@platformatic/kafka`, maintained, fencing by group (KIP-447); kafkajs stays supported. */
export const defaultKafkaClient: KafkaClientName = 'platformatic';
