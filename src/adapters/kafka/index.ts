export {
  type BadIdReason,
  type DeadLetter,
  type DeadLetterInfo,
  type DeadLetterSender,
  type DlqReason,
  deadLetterMessage,
  dlqHeaders,
  type IdSource,
  type IdVerdict,
  idSourceSchema,
  MAX_ERROR_CHARS,
  messageIdOf,
  messageIdReader,
  type RecordParts,
  readDeadLetter,
  type SourceMessage,
  sendDeadLetters,
} from '../../kafka/index.js';
export type { ConsumedMessage, KafkaClientName, MessageHeaders } from '../../kafka/port/index.js';
export type {
  AdapterConsumerConfig,
  KafkajsConsumer,
  KafkajsKafka,
  KafkajsProducer,
} from './kafkajs-shapes.js';
export {
  type KafkaAdapterConfig,
  type KafkaAdapterConnection,
  kafkaAdapterConfigSchema,
  kafkaAdapterConnectionSchema,
  kafkaAdapterDefaults,
  type ResolvedKafkaAdapterOptions,
  type RunIdempotentConsumerOptions,
  resolveKafkaAdapterOptions,
  retrySchema,
} from './options.js';
export { type BackoffOptions, BlockedRecord, type BlockKind, backoffMs } from './retry.js';
export { type IdempotentKafkaConsumer, runIdempotentConsumer } from './run-idempotent-consumer.js';
export {
  type BlockInfo,
  type DeadLetterEvent,
  type KafkaAdapterStats,
  type KafkaRecord,
  kafkaRecordId,
} from './types.js';
