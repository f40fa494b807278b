// The changelog primitive: dedup marks kept in a compacted Kafka topic, read back read_committed into a local
// store, with a checkpoint of what the store has applied. Used by the node's exactly-once mode and the `kafka`
// repository.
export { ChangelogCheckpoint } from './checkpoint.js';
export { type ChangelogMark, decodeMark, decodeMarkExpiry, encodeMark, markRecord } from './codec.js';
export {
  type ChangelogEntry,
  ChangelogReader,
  type ChangelogReaderOptions,
  type PartitionOffsets,
  type ReadChangelogOptions,
  readChangelog,
} from './reader.js';
export {
  type ChangelogRange,
  type ChangelogTarget,
  changeValue,
  decodeChanges,
  KafkaChangelogSink,
  type KafkaChangelogSinkOptions,
  type RecordSender,
  sendChanges,
  type UnreadableChange,
} from './sink.js';
export { KafkaChangelogSource, type KafkaChangelogSourceOptions } from './source.js';
export { type ChangelogTopicSpec, checkChangelogTopic, ensureChangelogTopic } from './topic.js';
