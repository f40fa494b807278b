import type { IdempotencyConflictError, InvalidInputError } from '../errors.js';
import type { IdempotencyRecord, MessageId } from '../store/types.js';
import type { TraceSource } from './telemetry/api.js';

/** What happened to one message (see each {@link ProcessResult} variant). */
export type Outcome = 'processed' | 'duplicate' | 'in-progress' | 'failed' | 'conflict' | 'no-id';

/** Codes of the consumer's warnings (`onWarning`). */
export type ConsumerWarningCode =
  | 'IDEM_NO_ID'
  | 'IDEM_LEASE_RENEWAL_FAILED'
  | 'IDEM_LEASE_RENEWAL_UNSUPPORTED'
  | 'IDEM_ON_OUTCOME_FAILED';

/** What the handler learns about the message it is given. */
export interface HandlerContext {
  /** Canonical id, or undefined for a message without one. */
  readonly id: string | undefined;
  /** True only when `skipDuplicate: false` hands a duplicate to the handler, as Camel does. */
  readonly duplicate: boolean;
  /** The record that made it a duplicate. */
  readonly existing?: IdempotencyRecord;
  /**
   * Under the `transaction` option: the open transaction's connection (`pg` PoolClient, `mysql2` PoolConnection),
   * typed by `postgresTransaction(context)` / `mysqlTransaction(context)`. Write the side effect through it.
   */
  readonly transaction?: unknown;
}

/** Where a message was read, as its source names it (the Kafka adapter: `{ topic, partition, offset }`). */
export type MessagePlace = Readonly<Record<string, string | number>>;

/** What made a message a duplicate: a `stored` record, another worker's `in-flight` claim, or its `batch`. */
export type DuplicateReason = 'stored' | 'in-flight' | 'batch';

/** The audit record of one duplicate, for `onDuplicate` (docs/engine.md); unknown fields are undefined. */
export interface DuplicateRecord {
  readonly id: string;
  readonly reason: DuplicateReason;
  /** Where this copy was read (`placeOf`). */
  readonly place: MessagePlace | undefined;
  /** `batch`: where the first copy was read. */
  readonly firstPlace: MessagePlace | undefined;
  /** When the first copy was seen, in epoch ms, as far as the record tells. */
  readonly firstSeen: number | undefined;
  /** How `firstSeen` was found: the record's `firstSeenAt`, its event time, or its retention end less `ttlMs`. */
  readonly firstSeenFrom: 'record' | 'event-time' | 'retention' | undefined;
  /** The record that made it a duplicate (undefined for `batch`). */
  readonly existing: IdempotencyRecord | undefined;
}

/** The user's existing per-message handler. */
export type MessageHandler<M, R = unknown> = (message: M, context: HandlerContext) => Promise<R> | R;

/** One message handed to a whole-batch handler. */
export interface BatchItem<M> {
  readonly message: M;
  readonly context: HandlerContext;
  /** Position in the batch passed to `processBatch`. */
  readonly index: number;
}

/** What a whole-batch handler may answer: the items that failed, as Lambda's `batchItemFailures`. */
export interface BatchItemFailures {
  readonly failed: readonly { readonly index: number; readonly error: unknown }[];
}

/** A handler that takes every message of a batch that needs handling in one call. */
export interface BatchHandler<M> {
  readonly batch: (
    items: readonly BatchItem<M>[],
    // biome-ignore lint/suspicious/noConfusingVoidType: a handler that answers nothing is the common case.
  ) => Promise<BatchItemFailures | void> | BatchItemFailures | void;
}

/** What every {@link ProcessResult} may carry, whatever its outcome. */
export interface ResultFields {
  /** The message's canonical id; undefined when it had none (`no-id`, or a `failed` id). */
  readonly id: string | undefined;
  /** On duplicates when the consumer keeps outcomes: whether the kept outcome was replayed. */
  readonly replayed?: boolean;
  /** On processed messages under `storeResult`: false when the value was not kept (too large, not serializable). */
  readonly resultKept?: boolean;
  /** The record that made it a duplicate or in-progress. */
  readonly existing?: IdempotencyRecord;
  /** The store failed and the `process` policy handled the message as new. */
  readonly failOpen?: boolean;
  /** Eager: the handler succeeded, but its claim had lapsed and another worker took the id over. */
  readonly claimLost?: boolean;
  /** Lazy: another worker marked the id between this one's check and mark, so both handled it. */
  readonly raced?: boolean;
  /** Event-time mode: the timestamp was missing or invalid and `forward` handled it without dedup. */
  readonly invalidInput?: InvalidInputError;
}

/** `processed`: new, and the handler succeeded; `result` is its value (undefined from a whole-batch handler). */
export interface ProcessedResult<R = unknown> extends ResultFields {
  readonly outcome: 'processed';
  readonly result: R;
  readonly error?: undefined;
}

/** `duplicate`: a live record held the id; `result` is the kept value (`replayed`), or the handler's. */
export interface DuplicateResult<R = unknown> extends ResultFields {
  readonly outcome: 'duplicate';
  readonly result?: R;
  readonly error?: undefined;
}

/** `no-id`: the message had no id and `nullId: 'forward'` handled it without dedup; `result` is the handler's value. */
export interface NoIdResult<R = unknown> extends ResultFields {
  readonly outcome: 'no-id';
  readonly id: undefined;
  readonly result: R;
  readonly error?: undefined;
}

/** `in-progress`: another worker holds a live, unconfirmed claim on the id (`existing`). */
export interface InProgressResult extends ResultFields {
  readonly outcome: 'in-progress';
  readonly result?: undefined;
  readonly error?: undefined;
}

/** `failed`: the handler threw, or the id was unusable or missing; `replayed`: a kept failure's replay. */
export interface FailedResult extends ResultFields {
  readonly outcome: 'failed';
  readonly error: unknown;
  readonly result?: undefined;
}

/** `conflict`: the id is held with another payload fingerprint; not handled. */
export interface ConflictResult extends ResultFields {
  readonly outcome: 'conflict';
  readonly error: IdempotencyConflictError;
  readonly result?: undefined;
}

/** The result of processing one message, discriminated by `outcome`. */
export type ProcessResult<R = unknown> =
  | ProcessedResult<R>
  | DuplicateResult<R>
  | NoIdResult<R>
  | InProgressResult
  | FailedResult
  | ConflictResult;

/** What stops a batch's lease renewals: read on each renewal tick; an `AbortSignal` is one. */
export interface RenewalSignal {
  readonly aborted: boolean;
}

/** Per-call options of {@link IdempotentConsumer.processBatch}. */
export interface BatchOptions {
  /** The stream of the batch (Kafka: `topic:partition`): event-time mode keeps a stream time and ids per stream. */
  readonly stream?: string;
  /** Observes every store call the batch makes. */
  readonly onStoreCall?: (call: StoreCall) => void;
  /** Eager: stops renewing this batch's claims once it aborts; they then lapse as a crashed worker's do. */
  readonly renewalSignal?: RenewalSignal;
  /** Where message `index` was read, for {@link DuplicateRecord.place} and `onOutcome`. */
  readonly placeOf?: (index: number) => MessagePlace | undefined;
  /** Where the batch's messages came from, for the consumer's telemetry. */
  readonly trace?: TraceSource;
}

/** What `onOutcome` is told of each message once its batch has settled, in input order. */
export interface OutcomeEvent {
  readonly id: string | undefined;
  readonly outcome: Outcome;
  /** The message's result as the call answers it. */
  readonly result: ProcessResult;
  /** Where it was read (`BatchOptions.placeOf`). */
  readonly place: MessagePlace | undefined;
  /** Milliseconds from the start of its batch until the batch settled. */
  readonly durationMs: number;
  /** Milliseconds its handler ran; undefined when none ran for it. */
  readonly handlerMs: number | undefined;
  /** Milliseconds of its batch's store calls. */
  readonly storeMs: number;
}

/** One store call made for a batch, as {@link BatchOptions.onStoreCall} sees it. */
export interface StoreCall {
  /** `lookup` (before the handlers), or the settle step: `confirm`, `release`, `mark`, `keep`. */
  readonly operation: string;
  readonly ms: number;
  readonly error?: unknown;
}

/** The result of {@link IdempotentConsumer.processBatch}: one result per input message, in input order. */
export interface BatchResult<R = unknown> {
  readonly results: ProcessResult<R>[];
}

/** How the id is found: a dotted field path (`"meta.id"`) or a function. Null/undefined means "no id". */
export type IdSelector<M> = string | ((message: M) => MessageId | number | bigint | null | undefined);

/** How the event timestamp is found: epoch ms (number, bigint or digits), a Date, or an ISO-8601 string. */
export type TimestampSelector<M> =
  | string
  | ((message: M) => number | bigint | string | Date | null | undefined);
