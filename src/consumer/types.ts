import type { IdempotencyConflictError, InvalidInputError } from '../errors.js';
import type { IdempotencyRecord, MessageId } from '../store/types.js';
import type { TraceSource } from './telemetry/api.js';

/**
 * What happened to one message:
 * - `processed`: new, the handler ran and succeeded;
 * - `duplicate`: a live record already held the id (or an earlier message in the same batch);
 * - `in-progress`: another worker holds a live, unconfirmed claim on the id;
 * - `failed`: the handler threw (or the id was unusable); the error is in `error`. A duplicate of a message
 *   whose failure was kept (`removeOnFailure: false`) is `failed` too, with `replayed: true`;
 * - `conflict`: a live record holds the id with a different payload fingerprint (`fingerprint` option): not
 *   handled; `error` is the IdempotencyConflictError;
 * - `no-id`: the message had no id and was forwarded without dedup.
 */
export type Outcome = 'processed' | 'duplicate' | 'in-progress' | 'failed' | 'conflict' | 'no-id';

/**
 * Codes of the consumer's warnings (`onWarning`): `IDEM_NO_ID` a whole batch had no id where `nullId` forwards;
 * `IDEM_LEASE_RENEWAL_FAILED` / `IDEM_LEASE_RENEWAL_UNSUPPORTED` a claim could not be kept alive;
 * `IDEM_ON_OUTCOME_FAILED` the `onOutcome` hook threw (the message's outcome stands).
 */
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
   * With a transactional repository (consumer option `transaction`): the open transaction's connection (for
   * `pg`, the `PoolClient` inside `BEGIN`; for `mysql2`, the `PoolConnection`). Write the side effect through
   * it, and the mark commits with it. `postgresTransaction(context)` / `mysqlTransaction(context)` give it
   * typed. Undefined outside a transaction.
   */
  readonly transaction?: unknown;
}

/**
 * Where a message was read, as its source names it: the Kafka adapter gives `{ topic, partition, offset }`;
 * a caller of `processBatch` gives what it knows through {@link BatchOptions.placeOf}.
 */
export type MessagePlace = Readonly<Record<string, string | number>>;

/**
 * What made a message a duplicate: `stored` a confirmed record in the store; `in-flight` another worker's live
 * claim (reported as a duplicate under `inProgress: 'duplicate'`); `batch` an earlier message of the same batch.
 */
export type DuplicateReason = 'stored' | 'in-flight' | 'batch';

/**
 * The audit record of one duplicate, the third argument of `onDuplicate`: which copy was dropped, where it was
 * read, and what is known of the first copy. Fields that cannot be known are present and undefined.
 */
export interface DuplicateRecord {
  /** The canonical id. */
  readonly id: string;
  readonly reason: DuplicateReason;
  /** Where this (dropped) copy was read; undefined when the caller gave no `placeOf`. */
  readonly place: MessagePlace | undefined;
  /** `batch`: where the first copy of this batch was read (same source as `place`); undefined otherwise. */
  readonly firstPlace: MessagePlace | undefined;
  /**
   * When the first copy was seen, in epoch ms, as far as the store's record tells (see `firstSeenFrom`).
   * Undefined when it cannot be told: a `batch` duplicate (the first copy is in this very batch), or a record
   * written by a version that kept no first-seen time and is another worker's in-flight claim (renewals move its
   * lease).
   */
  readonly firstSeen: number | undefined;
  /**
   * How `firstSeen` was found: `record` the record's own `firstSeenAt` (the time of the claim or mark that made
   * it; every store keeps it). For a record of a version that did not keep it: `event-time` the first copy's
   * event time, kept with the record in event-time mode; `retention` the time the record was confirmed (eager)
   * or marked (lazy), read as its retention end minus the consumer's `ttlMs` (exact while `ttlMs` is unchanged
   * since). Undefined with `firstSeen`.
   */
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

/**
 * What a whole-batch handler may answer: the items that failed (by `BatchItem.index`), as Lambda's
 * `batchItemFailures`. Those get the outcome `failed`: their claims are released and their ids are not marked,
 * so a redelivery handles them again (the dedup node leaves dead-lettered records unmarked this way).
 */
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
  /**
   * Set on duplicates when the consumer keeps outcomes (`storeResult`, or a kept failure): true when the
   * stored outcome was replayed (`result`, or `error` for a failure), false when the record had none to give
   * (kept before `storeResult`, too large, or not serializable).
   */
  readonly replayed?: boolean;
  /**
   * Set on processed messages under `storeResult`: false when the value was not kept with the id (larger than
   * the cap, or the serializer failed), so duplicates will not get it back. Counted in `stats.resultsNotKept`.
   */
  readonly resultKept?: boolean;
  /** The record that made it a duplicate or in-progress. */
  readonly existing?: IdempotencyRecord;
  /** The store failed and the `process` policy handled the message as new. */
  readonly failOpen?: boolean;
  /**
   * Eager mode: the handler succeeded, but its claim had lapsed and another worker took the id over before the
   * confirm (a handler slower than `leaseMs`). The other worker may run the message too. Counted in
   * `stats.claimsLost`; `lostClaim: 'error'` turns it into a ClaimLostError.
   */
  readonly claimLost?: boolean;
  /**
   * Lazy mode: another worker marked the id between this consumer's check and its mark, so both handled it
   * (lazy mode's known race). Counted in `stats.raced`.
   */
  readonly raced?: boolean;
  /**
   * Event-time mode only: the record's timestamp was missing or invalid and the `forward` policy handled it
   * without dedup. The error names the field.
   */
  readonly invalidInput?: InvalidInputError;
}

/** `processed`: new, and the handler succeeded; `result` is its value (undefined from a whole-batch handler). */
export interface ProcessedResult<R = unknown> extends ResultFields {
  readonly outcome: 'processed';
  readonly result: R;
  readonly error?: undefined;
}

/**
 * `duplicate`: a live record (or an earlier message of the batch) held the id. `result` is the value kept with
 * the id when `replayed` is true, or the handler's value under `skipDuplicate: false`.
 */
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

/**
 * `failed`: the handler threw, or the id was unusable or missing (`nullId: 'reject'`); `error` says which. With
 * `replayed: true`, the replay of a failure kept with the id (a StoredFailureError).
 */
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

/**
 * The result of processing one message, discriminated by `outcome`: after `r.outcome === 'processed'`,
 * `r.result` is the handler's value (type `R`); after `'failed'` or `'conflict'`, `r.error` is set.
 */
export type ProcessResult<R = unknown> =
  | ProcessedResult<R>
  | DuplicateResult<R>
  | NoIdResult<R>
  | InProgressResult
  | FailedResult
  | ConflictResult;

/** Per-call options of {@link IdempotentConsumer.processBatch}. */
/** What stops a batch's lease renewals: read on each renewal tick; an `AbortSignal` is one. */
export interface RenewalSignal {
  readonly aborted: boolean;
}

export interface BatchOptions {
  /**
   * The stream this batch belongs to (the Kafka adapter passes `topic:partition`). Event-time mode keeps one
   * stream time, and one id space, per stream; other modes ignore it.
   */
  readonly stream?: string;
  /** Observes every store call the batch makes (metrics, tracing): operation, duration, and the error if any. */
  readonly onStoreCall?: (call: StoreCall) => void;
  /**
   * Eager: stops renewing this batch's claims once it aborts (e.g. the caller gave the work up); they then
   * lapse at their lease end, as a crashed worker's do. Only `aborted` is read (on each renewal tick), so an
   * `AbortSignal` or any object with that flag serves.
   */
  readonly renewalSignal?: RenewalSignal;
  /**
   * Where message `index` (its position in this call's messages) was read, for the duplicate audit record
   * ({@link DuplicateRecord.place}). Called only for duplicates, and only when `onDuplicate` is set.
   */
  readonly placeOf?: (index: number) => MessagePlace | undefined;
  /**
   * Where the batch's messages came from, for the spans and metrics of the consumer's `telemetry` option: their
   * incoming trace context, span kind and attributes (the Kafka and HTTP adapters fill it in).
   */
  readonly trace?: TraceSource;
}

/**
 * What the consumer's `onOutcome` hook is told of each message once its batch has settled (its claim confirmed
 * or released, its mark written): one event per message, in input order.
 */
export interface OutcomeEvent {
  /** The canonical id; undefined when the message had none. */
  readonly id: string | undefined;
  readonly outcome: Outcome;
  /** The message's result as the call answers it: `error`, `replayed`, `failOpen`, `claimLost`, ... */
  readonly result: ProcessResult;
  /** Where it was read (`BatchOptions.placeOf`: the Kafka adapter gives topic, partition and offset). */
  readonly place: MessagePlace | undefined;
  /** Milliseconds from the start of its batch until the batch settled. */
  readonly durationMs: number;
  /** Milliseconds its handler ran (a whole-batch handler: the whole call); undefined when none ran for it. */
  readonly handlerMs: number | undefined;
  /** Milliseconds of its batch's store calls (lookup, then confirm, release, mark or keep), shared by the batch. */
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

/**
 * How the event timestamp is found: a dotted field path or a function. Accepted values: epoch ms as a whole
 * number >= 0, a bigint or a string of digits (kafkajs gives `"1700000000000"`), a Date, or an ISO-8601 string.
 */
export type TimestampSelector<M> =
  | string
  | ((message: M) => number | bigint | string | Date | null | undefined);
