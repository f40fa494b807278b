export { type IdempotentDecorator, type IdempotentMethodOptions, idempotent } from './decorator.js';
export {
  EventTimeDeduplicator,
  type EventTimeStats,
  eventTimeKey,
  MIN_STORE_LIFETIME_MS,
} from './event-time.js';
export { toEpochMs } from './event-timestamp.js';
export { IdempotentConsumer } from './idempotent-consumer.js';
export { idExtractor, readPath } from './message-id.js';
export {
  type ConsumerConfig,
  consumerConfigSchema,
  consumerDefaults,
  type EventTimeConfig,
  type EventTimeOptions,
  eventTimeConfigSchema,
  eventTimeDefaults,
  eventTimeFromConfig,
  type FingerprintSelector,
  type IdempotentConsumerOptions,
  type ResolvedConsumerOptions,
  type ResolvedEventTimeOptions,
  type StoreResultOptions,
} from './options.js';
export type { Batch, Decision, DedupRule, RuleTraits, StoreGuard } from './rule.js';
export { DEFAULT_STREAM } from './rule.js';
export { type ConsumerStats, emptyStats } from './stats.js';
export type {
  OpenTelemetryApi,
  TelemetryAttributes,
  TelemetryAttributeValue,
  TelemetryOptions,
  TraceCarrier,
  TraceSource,
} from './telemetry/api.js';
export type * from './types.js';
