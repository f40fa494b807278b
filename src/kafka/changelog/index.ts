// The changelog primitive: dedup marks in a compacted topic, read back read_committed into a local store,
// with a checkpoint of what it applied. Used by the node and the `kafka` repository.
export * from './checkpoint.js';
export * from './codec.js';
export * from './reader.js';
export * from './sink.js';
export * from './source.js';
export * from './topic.js';
