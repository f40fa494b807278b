export { type BatchOptions, type BatchResult, IdempotentConsumer } from './idempotent-consumer.js';
export { idExtractor, readPath } from './message-id.js';
export {
  type ConsumerConfig,
  consumerConfigSchema,
  consumerDefaults,
  type IdempotentConsumerOptions,
  type ResolvedConsumerOptions,
} from './options.js';
export { type ConsumerStats, emptyStats } from './stats.js';
export type {
  BatchHandler,
  BatchItem,
  HandlerContext,
  IdSelector,
  MessageHandler,
  Outcome,
  ProcessResult,
} from './types.js';
