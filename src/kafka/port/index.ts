// The Kafka port: the client-neutral interface of the node, the adapter, the changelog and the `kafka` store.
// Implementations in kafkajs/ and platformatic/, loaded by `openKafkaClient`; nothing here imports a client.
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
