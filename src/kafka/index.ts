// The Kafka vocabulary shared by the adapter (src/adapters/kafka) and the dedup node (src/node): where a record's
// id comes from and how it is read, and what a dead letter carries. Both import it from here, never from each other.
export {
  type DeadLetter,
  type DeadLetterInfo,
  type DeadLetterSender,
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
