export {
  type DeadLetter,
  type DeadLetterInfo,
  type DlqReason,
  deadLetterMessage,
  dlqHeaders,
  MAX_ERROR_CHARS,
  readDeadLetter,
  type SourceMessage,
  sendDeadLetters,
} from './dlq.js';
export {
  type BadIdReason,
  type IdSource,
  type IdVerdict,
  idSourceSchema,
  messageIdOf,
  messageIdReader,
  type RecordParts,
} from './message-id.js';
export {
  type KafkaAdapterConfig,
  kafkaAdapterConfigSchema,
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
