// The Kafka port: the one client-neutral interface the node, the Kafka adapter, the changelog and the `kafka`
// repository work through. Implementations: src/kafka/kafkajs/ and src/kafka/platformatic/, loaded by
// `openKafkaClient` (config key `kafka.client`). Nothing here imports a client library.
export * from './admin.js';
export * from './client.js';
export * from './consumer.js';
export * from './errors.js';
export * from './names.js';
export * from './open.js';
export * from './partition-reader.js';
export * from './producer.js';
export * from './records.js';
export * from './serial.js';
