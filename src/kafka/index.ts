// The Kafka vocabulary shared by the adapter (src/adapters/kafka) and the dedup node (src/node): how a record's id
// is read, which records are acked, retried or dead-lettered, and how. Both import it here, never from each other.
export {
  type DeadLetter,
  type DeadLetterInfo,
  type DeadLetterSender,
  type DlqReason,
  deadLetterMessage,
  dlqHeaders,
  MAX_ERROR_CHARS,
  type RecordFate,
  readDeadLetter,
  recordFate,
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
