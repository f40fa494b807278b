// The Kafka vocabulary shared by the adapter (src/adapters/kafka) and the dedup node (src/node): how a record's id
// is read, and which records are acked, retried or dead-lettered. Both import it here, never from each other.
export * from './dlq.js';
export * from './message-id.js';
