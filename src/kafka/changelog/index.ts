// The changelog primitive: dedup marks kept in a compacted Kafka topic, read back read_committed into a local
// store, with a checkpoint of what the store has applied. Used by the node's exactly-once mode and the `kafka`
// repository.
export * from './checkpoint.js';
export * from './codec.js';
export * from './reader.js';
export * from './sink.js';
export * from './source.js';
export * from './topic.js';
