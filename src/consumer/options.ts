import { z } from 'zod';
import { parseOptions } from '../options/issues.js';
import { isTransactional } from '../store/transaction.js';
import { MAX_TTL_MS, maxDurationMs } from '../store/ttl.js';
import type { IdempotentRepository } from '../store/types.js';
import { durationSchema } from '../util/duration.js';
import { OutcomeCipher, type OutcomeEncryptionOptions } from './encryption.js';
import { REPLAY_EPOCH } from './message-id.js';
import type { TelemetryOptions } from './telemetry/api.js';
import type {
  ConsumerWarningCode,
  DuplicateRecord,
  HandlerContext,
  IdSelector,
  OutcomeEvent,
  TimestampSelector,
} from './types.js';

/** Defaults of the consumer, written once; config and the constructor both read them from here. */
export const consumerDefaults = {
  mode: 'eager',
  ttlMs: 24 * 3_600_000,
  leaseMs: 60_000,
  removeOnFailure: true,
  skipDuplicate: true,
  /** Camel's rule: a message without id is refused (a typo in the id path must not turn dedup off). */
  nullId: 'reject',
  inProgress: 'error',
  storeFailure: 'fail',
  lostClaim: 'report',
  onConflict: 'report',
  failureMessage: 'redacted',
  lockTimeoutMs: 5_000,
} as const;

/** Defaults of event-time mode (KIP-655), written once. */
export const eventTimeDefaults = {
  /** The Kafka record timestamp, as the Kafka adapter hands it over. */
  timestamp: 'timestamp',
  by: 'key',
  invalidTimestamp: 'fail',
  extraRetentionMs: 0,
  /** KIP-655's rule: a record with a null key (or value id) is forwarded without dedup. */
  nullId: 'forward',
} as const;

/** A replay epoch in a config file: text only, so that an env var `007` is not read as the number 7. */
export const replayEpochConfigSchema = z
  .string({ error: 'must be a text such as "2" or "2026-12-06-fix"' })
  .regex(REPLAY_EPOCH, {
    error: 'must be letters, digits, ".", "_", ":" or "-" (at most 64)',
  });

/** A replay epoch in code: such a text, or a whole number >= 0 (`3` and `"3"` are the same epoch). */
const replayEpochSchema = z.union(
  [replayEpochConfigSchema, z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)],
  { error: 'must be letters, digits, ".", "_", ":" or "-" (at most 64), or a whole number >= 0' },
);

/** An interval of 0 still makes equal timestamps duplicates. */
const intervalMs = durationSchema({ allowZero: true, integer: true });

/** A retention or lease, within the longest any store keeps (a store may declare less). */
const ttlDuration = durationSchema({ max: MAX_TTL_MS });

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

export type EventTimeConfig = z.output<typeof eventTimeConfigSchema>;

/** The `[consumer]` table, and the one place the options it shares with code are written (but durations' names). */
export const consumerConfigSchema = z
  .object({
    id: z.string().min(1).optional(),
    mode: z.enum(['eager', 'lazy']).default(consumerDefaults.mode),
    ttl: ttlDuration.default(consumerDefaults.ttlMs),
    lease: ttlDuration.default(consumerDefaults.leaseMs),
    removeOnFailure: z.boolean().default(consumerDefaults.removeOnFailure),
    skipDuplicate: z.boolean().default(consumerDefaults.skipDuplicate),
    nullId: z.enum(['forward', 'reject']).optional(),
    inProgress: z.enum(['duplicate', 'error']).default(consumerDefaults.inProgress),
    storeFailure: z.enum(['fail', 'process']).default(consumerDefaults.storeFailure),
    lostClaim: z.enum(['report', 'error']).default(consumerDefaults.lostClaim),
    failureMessage: z.enum(['redacted', 'name']).default(consumerDefaults.failureMessage),
    /** Keys as base64 text by key id; the whole table is redacted in messages. */
    encryption: z
      .object({
        keys: z.record(z.string(), z.string()),
        currentKeyId: z.string(),
        allowPlaintext: z.boolean().optional(),
      })
      .strict()
      .optional(),
    eventTime: eventTimeConfigSchema.optional(),
    transaction: z
      .literal(['message', 'batch', false], { error: 'must be "message", "batch" or false' })
      .optional(),
    lockTimeout: durationSchema({ integer: true, max: 3_600_000 }).default(consumerDefaults.lockTimeoutMs),
    replayEpoch: replayEpochConfigSchema.optional(),
  })
  .strict();

export type ConsumerConfig = z.output<typeof consumerConfigSchema>;

/** Turns the `[consumer.eventTime]` table into the consumer's `eventTime` option. */
export function eventTimeFromConfig(config: EventTimeConfig): EventTimeOptions<unknown> {
  const { interval, extraRetention, ...rest } = config;
  return { intervalMs: interval, extraRetentionMs: extraRetention, ...rest };
}

/** Event-time deduplication as Kafka Streams' `deduplicateByKey` (KIP-655; docs/event-time.md). */
export interface EventTimeOptions<M> {
  /** KIP-655's `deduplicationInterval`, in ms (an integer, 0 allowed). */
  readonly intervalMs: number;
  /** Where the event timestamp comes from: a dotted field path (default `timestamp`) or a function. */
  readonly timestamp?: TimestampSelector<M>;
  /** `key` (default): the consumer's `id` is the dedup id; `keyValue`: duplicates share `id` and `valueId`. */
  readonly by?: 'key' | 'keyValue';
  /** With `by: 'keyValue'`: the id computed from the value. A null id forwards the record without dedup. */
  readonly valueId?: IdSelector<M>;
  /** A missing or invalid timestamp: `fail` (default, an InvalidInputError) or `forward` without dedup. */
  readonly invalidTimestamp?: 'fail' | 'forward';
  /** How long, in ms of stream time, a store keeps a record past its purge (default 0; docs/event-time.md). */
  readonly extraRetentionMs?: number;
}

/** Event-time options with every default applied. */
export type ResolvedEventTimeOptions<M> = Required<Omit<EventTimeOptions<M>, 'valueId'>> &
  Pick<EventTimeOptions<M>, 'valueId'>;

/** How the consumer keeps each handler's value with its id (docs/results.md). */
export interface StoreResultOptions {
  /** Largest serialized value kept, in UTF-8 bytes (at most the store's `maxResultBytes`); else `resultKept: false`. */
  readonly maxBytes?: number;
  /** Turns a handler's value into text; a throw means "not kept" (never a failure of the message). */
  readonly serialize?: (value: unknown) => string;
  /** Inverse of `serialize`; a throw means the duplicate gets no result (`replayed: false`). */
  readonly deserialize?: (text: string) => unknown;
  /** Which values are kept (default: all); one refused is not kept, as if too large. */
  readonly storeIf?: (value: unknown) => boolean;
}

/** What a kept failure keeps of the error: its name and redacted message (default), or its `name` only. */
export type FailureMessagePolicy = 'redacted' | 'name';

/** What the payload fingerprint (SHA-256) is computed from: the whole message, the named fields, or a function's value. */
export type FingerprintSelector<M> = true | readonly string[] | ((message: M) => string | Uint8Array);

/** Options of {@link IdempotentConsumer}. */
export interface IdempotentConsumerOptions<M> {
  readonly repository: IdempotentRepository;
  /** Where the message id comes from: a dotted field path or a function. */
  readonly id: IdSelector<M>;
  /** `eager` (default) claims the id before the handler; `lazy` checks, runs, then marks (duplicates may race). */
  readonly mode?: 'eager' | 'lazy';
  /** Retention: how long a handled id stays a duplicate, in ms. */
  readonly ttlMs?: number;
  /** How long an unconfirmed claim blocks others, in ms (renewed while its handler runs). */
  readonly leaseMs?: number;
  /** Release the claim when the handler throws (default); false keeps the failure, replayed to duplicates. */
  readonly removeOnFailure?: boolean;
  /** Keep each handler's value with its id, replayed to duplicates as `result` (see {@link StoreResultOptions}). */
  readonly storeResult?: boolean | StoreResultOptions;
  /** What a kept failure (`removeOnFailure: false`) keeps of the error message (see {@link FailureMessagePolicy}). */
  readonly failureMessage?: FailureMessagePolicy;
  /** Encrypts every kept outcome with AES-256-GCM (see {@link OutcomeEncryptionOptions}). */
  readonly encryption?: OutcomeEncryptionOptions;
  /** Keep a payload digest with the id: a later message with the id and another digest is a `conflict`. */
  readonly fingerprint?: FingerprintSelector<M>;
  /** A `conflict`: `report` (default) returns it; `error` makes `process`/`wrap` reject with it. */
  readonly onConflict?: 'report' | 'error';
  /** Skip the handler for duplicates (default). False runs it with `context.duplicate = true`. */
  readonly skipDuplicate?: boolean;
  /** Called for every duplicate with its audit record ({@link DuplicateRecord}); its failure fails the message. */
  readonly onDuplicate?: (
    message: M,
    context: HandlerContext,
    duplicate: DuplicateRecord,
  ) => Promise<void> | void;
  /** A message without id: `reject` (default) fails it; `forward` (default with `eventTime`) handles it as `no-id`. */
  readonly nullId?: 'forward' | 'reject';
  /** Receives the consumer's warnings; default `process.emitWarning` (type `IdempotencyWarning`). */
  readonly onWarning?: (message: string, code: ConsumerWarningCode) => void;
  /** OpenTelemetry spans and metrics, from the `@opentelemetry/api` module you pass (docs/telemetry.md). */
  readonly telemetry?: TelemetryOptions;
  /** Called for each message once its batch settled ({@link OutcomeEvent}); a throw is only warned about. */
  readonly onOutcome?: (event: OutcomeEvent) => void;
  /** Another worker's live claim: report it as a `duplicate`, or as `in-progress` / InProgressError to retry. */
  readonly inProgress?: 'duplicate' | 'error';
  /** Store down: `fail` raises RepositoryError and treats nothing as new; `process` handles messages as new. */
  readonly storeFailure?: 'fail' | 'process';
  /** A confirm that found its claim taken over: `report` (default) in the result, or `error` (ClaimLostError). */
  readonly lostClaim?: 'report' | 'error';
  /** Event-time deduplication (KIP-655); `mode`, `ttlMs`, `leaseMs`, `removeOnFailure` and `inProgress` then do not apply. */
  readonly eventTime?: EventTimeOptions<M>;
  /**
   * With a transactional repository, the mark commits in the side effect's transaction (`context.transaction`):
   * one per message (default with such a store), per `processBatch` (`'batch'`), or none (docs/transactions.md).
   */
  readonly transaction?: 'message' | 'batch' | false;
  /** In a transaction: how long a claim waits for another one that holds the id, in ms (default 5 s). */
  readonly lockTimeoutMs?: number;
  /** Deliberate replays: ids are kept per epoch, so a new epoch handles each id once more (docs/operations.md). */
  readonly replayEpoch?: string | number;
}

/** Options with every default applied (those without one stay optional). */
export type ResolvedConsumerOptions<M> = Omit<
  IdempotentConsumerOptions<M>,
  keyof typeof consumerDefaults | 'eventTime' | 'transaction'
> &
  Required<Pick<IdempotentConsumerOptions<M>, keyof typeof consumerDefaults>> & {
    readonly eventTime?: ResolvedEventTimeOptions<M>;
    readonly transaction: 'message' | 'batch' | false;
  };

/** `630720000000 ms (20 years)`. */
function msInWords(ms: number): string {
  const units: [number, string][] = [
    [365 * 86_400_000, 'years'],
    [86_400_000, 'days'],
    [3_600_000, 'hours'],
  ];
  const unit = units.find(([size]) => ms >= 2 * size);
  return unit ? `${ms} ms (${Math.floor(ms / unit[0])} ${unit[1]})` : `${ms} ms`;
}

/** A dotted field path: `a.b`, no empty step. */
const isFieldPath = (value: unknown) =>
  typeof value === 'string' && value.split('.').every((step) => step.length > 0);

/** A dotted field path or a function (`.optional()` where it may be left out). */
const selectorSchema = z.custom<unknown>((value) => typeof value === 'function' || isFieldPath(value), {
  error: (issue) =>
    issue.input === undefined ? 'is required' : 'must be a dotted field path ("a.b") or a function',
});

const functionSchema = z.custom<unknown>((value) => typeof value === 'function', {
  error: 'must be a function',
});

const aboveZero = { error: 'must be greater than 0' };

const positiveMs = z
  .number({ error: 'must be a number of milliseconds' })
  .positive(aboveZero)
  .max(MAX_TTL_MS, { error: `must be at most ${MAX_TTL_MS} ms (100 years)` });

/** A whole number of `unit` (milliseconds, bytes); its checks need their own words (its error covers them). */
function wholeNumber(unit: string) {
  const error = `must be a whole number of ${unit}`;
  return z.number({ error }).int({ error });
}

const wholeMs = wholeNumber('milliseconds').min(0, { error: 'must be at least 0' });

/** Event-time options as code passes them (the config table is {@link eventTimeConfigSchema}). */
const eventTimeOptionsSchema = z
  .object({
    intervalMs: wholeMs,
    timestamp: selectorSchema.optional(),
    by: eventTimeConfigSchema.shape.by,
    valueId: selectorSchema.optional(),
    invalidTimestamp: eventTimeConfigSchema.shape.invalidTimestamp,
    extraRetentionMs: wholeMs.optional(),
  })
  .strict()
  .superRefine((options, ctx) => {
    const keyValue = (options.by ?? eventTimeDefaults.by) === 'keyValue';
    if (keyValue === (options.valueId === undefined)) {
      const message = keyValue ? 'is required with by = "keyValue"' : 'is only used with by = "keyValue"';
      ctx.addIssue({ code: 'custom', path: ['valueId'], message });
    }
  });

/** `storeResult`: a boolean, or the serializer and cap. */
const storeResultSchema = z.union(
  [
    z.boolean(),
    z
      .object({
        maxBytes: wholeNumber('bytes').positive(aboveZero).optional(),
        serialize: functionSchema.optional(),
        deserialize: functionSchema.optional(),
        storeIf: functionSchema.optional(),
      })
      .strict(),
  ],
  { error: 'must be true, false or { maxBytes?, serialize?, deserialize?, storeIf? }' },
);

/** `fingerprint`: true, a non-empty list of dotted field paths, or a function. */
const fingerprintSchema = z.custom<unknown>(
  (value) =>
    value === true ||
    typeof value === 'function' ||
    (Array.isArray(value) && value.length > 0 && value.every(isFieldPath)),
  { error: 'must be true, a non-empty list of dotted field paths (["a.b"]) or a function' },
);

/** `telemetry`; the HTTP adapter checks it too. */
export const telemetrySchema = z
  .object({
    api: z.custom<unknown>(
      (api) =>
        typeof (api as { trace?: { getTracer?: unknown } } | undefined)?.trace?.getTracer === 'function' &&
        typeof (api as { metrics?: { getMeter?: unknown } }).metrics?.getMeter === 'function',
      { error: "must be the @opentelemetry/api module: import * as api from '@opentelemetry/api'" },
    ),
    recordIds: z.boolean().optional(),
  })
  .strict();

/** `encryption` as code passes it (OutcomeCipher checks its keys); the HTTP adapter's too. */
export const encryptionSchema = z.custom<unknown>((value) => typeof value === 'object' && value !== null, {
  error: 'must be { keys: { <key id>: <32-byte key> }, currentKeyId }',
});

/** The `[consumer]` keys code takes as they are (the defaults only fill the checked copy). */
const asInConfig = consumerConfigSchema.omit({
  id: true,
  ttl: true,
  lease: true,
  lockTimeout: true,
  eventTime: true,
  encryption: true,
  replayEpoch: true,
}).shape;

/** Every option of {@link IdempotentConsumerOptions}, checked as strictly as a config file. */
const consumerOptionsSchema = z
  .object({
    repository: z.custom<IdempotentRepository>(
      (value) =>
        typeof value === 'object' &&
        typeof (value as Partial<IdempotentRepository> | null)?.addMany === 'function' &&
        typeof (value as Partial<IdempotentRepository>).confirmMany === 'function',
      {
        error: (issue) =>
          issue.input === undefined ? 'is required' : 'must be a repository (an IdempotentRepository)',
      },
    ),
    ...asInConfig,
    id: selectorSchema,
    ttlMs: positiveMs.optional(),
    leaseMs: positiveMs.optional(),
    onDuplicate: functionSchema.optional(),
    onWarning: functionSchema.optional(),
    telemetry: telemetrySchema.optional(),
    onOutcome: functionSchema.optional(),
    storeResult: storeResultSchema.optional(),
    encryption: encryptionSchema.optional(),
    fingerprint: fingerprintSchema.optional(),
    onConflict: z.enum(['report', 'error']).optional(),
    eventTime: eventTimeOptionsSchema.optional(),
    lockTimeoutMs: wholeNumber('milliseconds')
      .positive(aboveZero)
      .max(3_600_000, { error: 'must be at most 3600000 ms (1 hour)' })
      .optional(),
    replayEpoch: replayEpochSchema.optional(),
  })
  .strict()
  .superRefine((options, ctx) => {
    const issue = (path: string[], message: string) => ctx.addIssue({ code: 'custom', path, message });
    const { transaction, eventTime, repository } = options;
    if (transaction === 'message' || transaction === 'batch') {
      if (!isTransactional(repository)) {
        issue(
          ['transaction'],
          'needs a transactional repository (PostgresRepository or MySqlRepository): this one commits each write on its own',
        );
      }
      if (eventTime !== undefined) issue(['transaction'], 'does not apply with eventTime');
      // A database error aborts the transaction: nothing can be handled "as new" inside it afterwards.
      if (options.storeFailure === 'process') {
        issue(
          ['storeFailure'],
          'must be "fail" with a transaction: a failed store call aborts the transaction',
        );
      }
    }
    // Event-time records are judged by timestamps; they keep neither outcomes nor digests.
    for (const key of ['storeResult', 'fingerprint'] as const) {
      const value = options[key];
      if (eventTime !== undefined && value !== undefined && value !== false) {
        issue([key], 'does not apply with eventTime');
      }
    }
    // A cap above what the store keeps would fail the write after the side effect: refuse it up front.
    const maxResult = repository.capabilities?.maxResultBytes;
    const maxBytes = typeof options.storeResult === 'object' ? options.storeResult.maxBytes : undefined;
    if (maxBytes !== undefined && maxResult !== undefined && maxBytes > maxResult) {
      issue(
        ['storeResult', 'maxBytes'],
        `must be at most ${maxResult} bytes, the largest result the store keeps`,
      );
    }
    // A TTL or lease the store would silently cut short is a configuration error, not a surprise later.
    const max = maxDurationMs(repository.capabilities?.maxTtlMs);
    for (const key of ['ttlMs', 'leaseMs'] as const) {
      if ((options[key] ?? consumerDefaults[key]) > max) {
        issue([key], `must be at most ${msInWords(max)}, the longest the store can keep`);
      }
    }
  });

/** Checks the options as strictly as config (each problem a ConfigError naming the option); applies defaults. */
export function resolveConsumerOptions<M>(
  options: IdempotentConsumerOptions<M>,
  owner = 'new IdempotentConsumer(...)',
): ResolvedConsumerOptions<M> {
  const given = stripUndefined(options);
  const eventTime = options.eventTime && stripUndefined(options.eventTime);
  parseOptions(consumerOptionsSchema, eventTime ? { ...given, eventTime } : given, { kind: 'code', owner });
  // Checks the keys now, so a bad key is a ConfigError at construction (the engine builds its own cipher).
  if (options.encryption !== undefined) new OutcomeCipher(options.encryption, owner);
  const { nullId: forward, ...eventTimeRest } = eventTimeDefaults; // nullId is a consumer option
  return {
    ...consumerDefaults,
    ...given,
    nullId: options.nullId ?? (eventTime ? forward : consumerDefaults.nullId),
    // By default one per message with a transactional store, but none under eventTime or storeFailure 'process'.
    transaction:
      options.transaction ??
      (!eventTime && options.storeFailure !== 'process' && isTransactional(options.repository) && 'message'),
    ...(eventTime ? { eventTime: { ...eventTimeRest, ...eventTime } } : {}),
  } as ResolvedConsumerOptions<M>;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
