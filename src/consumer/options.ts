import { z } from 'zod';
import { ConfigError } from '../errors.js';
import type { IdempotentRepository } from '../repositories/types.js';
import { durationMs, parseDuration } from '../util/duration.js';
import type { HandlerContext, IdSelector, TimestampSelector } from './types.js';

/** Defaults of the consumer, written once; config and the constructor both read them from here. */
export const consumerDefaults = {
  mode: 'eager',
  ttlMs: 24 * 3_600_000,
  leaseMs: 60_000,
  removeOnFailure: true,
  skipDuplicate: true,
  nullId: 'forward',
  inProgress: 'error',
  storeFailure: 'fail',
} as const;

/** Defaults of event-time mode (KIP-655), written once. */
export const eventTimeDefaults = {
  /** The Kafka record timestamp, as the Kafka adapter hands it over. */
  timestamp: 'timestamp',
  by: 'key',
  invalidTimestamp: 'fail',
  extraRetentionMs: 0,
} as const;

/** A duration that may be zero (an interval of 0 still makes equal timestamps duplicates). */
const intervalMs = z.union([z.number(), z.string()]).transform((value, ctx) => {
  const ms = parseDuration(value);
  if (ms === undefined || ms < 0 || !Number.isInteger(ms)) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a duration such as 0ms, 500ms, 30s or 5m, got ${JSON.stringify(value)}`,
    });
    return z.NEVER;
  }
  return ms;
});

/** The `[consumer.eventTime]` table: event-time deduplication (KIP-655) instead of the processing-time TTL. */
export const eventTimeConfigSchema = z
  .object({
    interval: intervalMs,
    timestamp: z.string().min(1).default(eventTimeDefaults.timestamp),
    by: z.enum(['key', 'keyValue']).default(eventTimeDefaults.by),
    valueId: z.string().min(1).optional(),
    invalidTimestamp: z.enum(['fail', 'forward']).default(eventTimeDefaults.invalidTimestamp),
    extraRetention: intervalMs.default(eventTimeDefaults.extraRetentionMs),
  })
  .strict();

/** Parsed `[consumer.eventTime]` config. */
export type EventTimeConfig = z.output<typeof eventTimeConfigSchema>;

/**
 * The `[consumer]` table of a config file. Function-valued options (id function, hooks) exist only in code;
 * config names the id by a dotted field path.
 */
export const consumerConfigSchema = z
  .object({
    id: z.string().min(1).optional(),
    mode: z.enum(['eager', 'lazy']).default(consumerDefaults.mode),
    ttl: durationMs.default(consumerDefaults.ttlMs),
    lease: durationMs.default(consumerDefaults.leaseMs),
    removeOnFailure: z.boolean().default(consumerDefaults.removeOnFailure),
    skipDuplicate: z.boolean().default(consumerDefaults.skipDuplicate),
    nullId: z.enum(['forward', 'reject']).default(consumerDefaults.nullId),
    inProgress: z.enum(['duplicate', 'error']).default(consumerDefaults.inProgress),
    storeFailure: z.enum(['fail', 'process']).default(consumerDefaults.storeFailure),
    eventTime: eventTimeConfigSchema.optional(),
  })
  .strict();

/** Parsed `[consumer]` config. */
export type ConsumerConfig = z.output<typeof consumerConfigSchema>;

/** Turns the `[consumer.eventTime]` table into the consumer's `eventTime` option. */
export function eventTimeFromConfig(config: EventTimeConfig): EventTimeOptions<unknown> {
  const { interval, extraRetention, ...rest } = config;
  return { intervalMs: interval, extraRetentionMs: extraRetention, ...rest };
}

/**
 * Event-time deduplication in the manner of Kafka Streams' `deduplicateByKey`/`deduplicateByKeyValue`
 * (KIP-655). Records of one id whose event timestamps lie within `intervalMs` of a forwarded record's, both
 * bounds inclusive, are duplicates, judged against a stream time (the largest timestamp seen on the stream)
 * rather than the wall clock. See docs/event-time.md for the rules, late records and storage.
 */
export interface EventTimeOptions<M> {
  /** KIP-655's `deduplicationInterval`, in ms (an integer, 0 allowed). */
  readonly intervalMs: number;
  /** Where the event timestamp comes from: a dotted field path (default `timestamp`) or a function. */
  readonly timestamp?: TimestampSelector<M>;
  /**
   * `key` (default, `deduplicateByKey`): the consumer's `id` is the record key and the deduplication id.
   * `keyValue` (`deduplicateByKeyValue`): duplicates share the key (`id`) and the `valueId`.
   */
  readonly by?: 'key' | 'keyValue';
  /** With `by: 'keyValue'`: the id computed from the value. A null id forwards the record without dedup. */
  readonly valueId?: IdSelector<M>;
  /**
   * A record whose timestamp is missing or invalid: `fail` (default) gives the outcome `failed` with an
   * InvalidInputError naming the field; `forward` handles it without dedup. Never dropped silently.
   */
  readonly invalidTimestamp?: 'fail' | 'forward';
  /**
   * How long, in ms of stream time, the store keeps a record past the point where event-time mode stops
   * counting it (default 0). Duplicates are judged from the stored event time either way; this only delays
   * garbage collection. Raise it on stores whose own TTL runs on the wall clock (Redis, Cassandra, DynamoDB) to
   * cover pauses and lag: while a stream is idle its stream time stands still, but those TTLs keep running.
   */
  readonly extraRetentionMs?: number;
}

/** Event-time options with every default applied. */
export type ResolvedEventTimeOptions<M> = Required<Omit<EventTimeOptions<M>, 'valueId'>> &
  Pick<EventTimeOptions<M>, 'valueId'>;

/** Options of {@link IdempotentConsumer}. */
export interface IdempotentConsumerOptions<M> {
  readonly repository: IdempotentRepository;
  /** Where the message id comes from: a dotted field path or a function. */
  readonly id: IdSelector<M>;
  /**
   * `eager` (default) claims the id atomically before the handler runs, so concurrent duplicates run once.
   * `lazy` checks, runs the handler, then marks: concurrent duplicates can both run.
   */
  readonly mode?: 'eager' | 'lazy';
  /** Retention: how long a handled id stays a duplicate, in ms. */
  readonly ttlMs?: number;
  /**
   * How long an unconfirmed claim blocks others, in ms. Longer than the slowest handler, or a slow handler's
   * message can run twice; short enough that a crashed worker's ids come back soon.
   */
  readonly leaseMs?: number;
  /** Release the claim when the handler throws, so a retry can succeed (default). False keeps it: at-most-once. */
  readonly removeOnFailure?: boolean;
  /** Skip the handler for duplicates (default). False runs it with `context.duplicate = true`. */
  readonly skipDuplicate?: boolean;
  /** Called for every duplicate, whether or not the handler is skipped. */
  readonly onDuplicate?: (message: M, context: HandlerContext) => Promise<void> | void;
  /** A message without id: `forward` runs the handler without dedup (KIP-655), `reject` throws NoMessageIdError. */
  readonly nullId?: 'forward' | 'reject';
  /** Another worker's live claim: report it as a `duplicate`, or as `in-progress` / InProgressError to retry. */
  readonly inProgress?: 'duplicate' | 'error';
  /** Store down: `fail` raises RepositoryError and treats nothing as new; `process` handles messages as new. */
  readonly storeFailure?: 'fail' | 'process';
  /**
   * Event-time deduplication (KIP-655) for this consumer. When set, the forwarding decision follows event
   * time and `mode`, `ttlMs`, `leaseMs`, `removeOnFailure` and `inProgress` do not apply (see docs/event-time.md).
   */
  readonly eventTime?: EventTimeOptions<M>;
}

/** Options with every default applied. */
export type ResolvedConsumerOptions<M> = Required<
  Omit<IdempotentConsumerOptions<M>, 'onDuplicate' | 'eventTime'>
> &
  Pick<IdempotentConsumerOptions<M>, 'onDuplicate'> & {
    readonly eventTime?: ResolvedEventTimeOptions<M>;
  };

/** Applies defaults; the numbers are checked here because code-built options skip the config schema. */
export function resolveConsumerOptions<M>(options: IdempotentConsumerOptions<M>): ResolvedConsumerOptions<M> {
  const resolved = { ...consumerDefaults, ...stripUndefined(options) } as ResolvedConsumerOptions<M>;
  for (const key of ['ttlMs', 'leaseMs'] as const) {
    const value = resolved[key];
    if (!Number.isFinite(value) || value <= 0) {
      throw new ConfigError(key, `expected a positive number of milliseconds, got ${String(value)}`);
    }
  }
  if (!resolved.repository) throw new ConfigError('repository', 'a repository is required');
  if (resolved.id === undefined) throw new ConfigError('id', 'expected a field path or a function');
  if (options.eventTime !== undefined) {
    return { ...resolved, eventTime: resolveEventTimeOptions(options.eventTime) };
  }
  return resolved;
}

/** Applies the event-time defaults and checks what the type system cannot. */
export function resolveEventTimeOptions<M>(options: EventTimeOptions<M>): ResolvedEventTimeOptions<M> {
  const resolved = { ...eventTimeDefaults, ...stripUndefined(options) } as ResolvedEventTimeOptions<M>;
  const { by, valueId, timestamp } = resolved;
  for (const key of ['intervalMs', 'extraRetentionMs'] as const) {
    const value = resolved[key];
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new ConfigError(
        `eventTime.${key}`,
        `expected a whole number of milliseconds >= 0, got ${String(value)}`,
      );
    }
  }
  if (by !== 'key' && by !== 'keyValue') {
    throw new ConfigError('eventTime.by', `expected "key" or "keyValue", got ${JSON.stringify(by)}`);
  }
  if (by === 'keyValue' && valueId === undefined) {
    throw new ConfigError('eventTime.valueId', 'required with by = "keyValue"');
  }
  if (by === 'key' && valueId !== undefined) {
    throw new ConfigError('eventTime.valueId', 'only used with by = "keyValue"');
  }
  for (const [key, selector] of [
    ['timestamp', timestamp],
    ['valueId', valueId],
  ] as const) {
    if (typeof selector === 'string' && selector.split('.').some((step) => step.length === 0)) {
      throw new ConfigError(`eventTime.${key}`, `bad field path ${JSON.stringify(selector)}`);
    }
  }
  if (resolved.invalidTimestamp !== 'fail' && resolved.invalidTimestamp !== 'forward') {
    throw new ConfigError(
      'eventTime.invalidTimestamp',
      `expected "fail" or "forward", got ${JSON.stringify(resolved.invalidTimestamp)}`,
    );
  }
  return resolved;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
