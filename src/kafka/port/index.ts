// The Kafka port: the one client-neutral interface every Kafka user of the package (the dedup node, the Kafka
// adapter, the changelog, the `kafka` repository) works through. Implementations: src/kafka/kafkajs/ and
// src/kafka/platformatic/, chosen by `openKafkaClient` (config key `kafka.client`). Types only, but for the
// factory and the client names.
export { type KafkaAdmin, type NewTopic, type PartitionOffsetRange, waitForLeaders } from './admin.js';
export {
  defaultKafkaClient,
  type KafkaClient,
  type KafkaClientBehaviour,
  type KafkaClientCapabilities,
  type KafkaClientFactory,
  type KafkaClientName,
  type KafkaClientSettings,
  type KafkaLogEntry,
  type KafkaLogSink,
  kafkaClientNames,
} from './client.js';
export type {
  ConsumedBatch,
  ConsumerCrash,
  GroupConsumer,
  GroupConsumerOptions,
  GroupJoin,
  RunOptions,
  TopicPartitions,
} from './consumer.js';
export type { KafkaErrorClassifier } from './errors.js';
export { type KafkaClientChoice, loadKafkaClientFactory, openKafkaClient } from './open.js';
export type {
  BatchRecord,
  FetchedPartition,
  PartitionFetch,
  PartitionReader,
  RecordBatch,
} from './partition-reader.js';
export type {
  GroupMetadata,
  GroupMetadataSource,
  KafkaProducer,
  KafkaTransaction,
  ProducerOptions,
  TransactionOffsets,
} from './producer.js';
export { CONCURRENT_TRANSACTIONS_RETRY_MS } from './producer.js';
export type {
  ConsumedMessage,
  MessageHeaders,
  OutgoingMessage,
  ProduceRequest,
  ProduceResult,
  RecordSender,
} from './records.js';
