import type { IdempotencyRecord } from '../store/types.js';
import type { HeldClaims } from './lease-renewal.js';
import type { BatchTelemetry } from './telemetry/telemetry.js';
import type { ProcessResult, StoreCall } from './types.js';

// The port between the engine, which owns every step of a batch, and the rules (processing-time, event-time).

/** What a rule says about one message that has an id. */
export type Decision =
  /** Handle it as new. `claims`: it becomes the batch's winner for its key (first received wins). */
  | { readonly kind: 'new'; readonly claims: boolean; readonly extra?: Pick<ProcessResult, 'invalidInput'> }
  /** A live record (or an earlier message of this batch) holds the key: duplicate or in-progress. */
  | { readonly kind: 'existing'; readonly existing: IdempotencyRecord | undefined }
  /** The message cannot be judged (e.g. an invalid event timestamp under the `fail` policy). */
  | { readonly kind: 'fail'; readonly error: unknown };

/** The working state of one batch, shared by the engine and its rule. */
export interface Batch<M> {
  readonly messages: readonly M[];
  /** `BatchOptions.stream`, or the default stream. */
  readonly stream: string;
  /** Canonical id per message; undefined when it has none (or its id was unusable: then `results[i]` is set). */
  readonly ids: (string | undefined)[];
  /** Store key per message, set by the rule's `begin` (undefined: not deduplicated). */
  readonly keys: (string | undefined)[];
  readonly results: ProcessResult[];
  /** The store read failed and the `process` policy handles every id as new. */
  failOpen: boolean;
  /** A whole-batch handler threw: every message it was given failed. */
  handlerThrew: boolean;
  /** Observes the batch's store calls (`BatchOptions.onStoreCall`, and the telemetry's). */
  readonly observe: ((call: StoreCall) => void) | undefined;
  /** The batch's spans and timings, when the consumer has `telemetry` or `onOutcome`. */
  readonly trace: BatchTelemetry | undefined;
  /**
   * First received wins: `head[i]` is the first position of message `i`'s key (-1: no key), `winner[h]` the
   * message holding head `h`'s key whose handler has not failed (-1: none).
   */
  readonly head: number[];
  readonly winner: number[];
  /** The positions of the keys' first occurrences: what the store is asked about. */
  heads: readonly number[];
  /** Payload digest per message under the `fingerprint` option. */
  readonly fingerprints: (string | undefined)[] | undefined;
  /** The encoded outcome to keep with message `i`'s record (a value, or a kept failure); undefined: none kept. */
  readonly kept: (string | undefined)[] | undefined;
}

/** What a rule changes in the engine's own work, read once by the engine's constructor. */
export interface RuleTraits<M> {
  /** The mode telemetry reports. */
  readonly mode: string;
  /** Each message's canonical id; undefined when it has none. */
  readonly idOf: (message: M) => string | undefined;
  /** Where the id is read, for messages: `at "order.id"`, or `from the id function`. */
  readonly idWhere: string;
  /** Why a message without id was handled (the whole-batch-without-id warning). */
  readonly forwardsNoId: string;
  /** A failed handler's outcome may be kept with its id (`removeOnFailure: false`). */
  readonly keepsFailures: boolean;
  /** A confirmed record's first-seen time is its expiry less this; undefined: its expiry does not tell. */
  readonly retentionMs: number | undefined;
}

/** The part of deduplication that differs between modes; the engine owns everything else. */
export interface DedupRule<M, S> {
  readonly traits: RuleTraits<M>;
  /** Sets `batch.keys`, may fail messages; `spare`: its state of a finished batch of one, to reuse. */
  begin(batch: Batch<M>, spare?: S): S;
  /** The one store call before any handler, for `batch.heads`. Undefined when already done (nothing to await). */
  lookup(state: S, batch: Batch<M>): Promise<void> | undefined;
  /** Message `i` is about to be decided (every message not failed before, with or without an id), in order. */
  receive?(state: S, batch: Batch<M>, i: number): void;
  /** Decides message `i`, in input order; `winner` is the earlier message of this batch that holds its key. */
  decide(state: S, batch: Batch<M>, i: number, winner: number | undefined): Decision;
  /** Message `i`'s handler finished (`ok`) or failed; a whole-batch handler's are `ok` when decided. */
  handled(state: S, batch: Batch<M>, i: number, ok: boolean): void;
  /** Confirms, releases or marks after the handlers; always called once `lookup` succeeded. As `lookup`. */
  settle(state: S, batch: Batch<M>, store: StoreGuard): Promise<void> | undefined;
  /** The claims the batch holds while its handlers run (eager), for lease renewal; none without it. */
  held?(state: S, batch: Batch<M>): HeldClaims | undefined;
}

/** The store-failure policy for the rules' store calls, timed with `start` (no closures per call). */
export interface StoreGuard {
  /** The start time of a store call (0 when nobody observes store calls). */
  start(batch: Batch<unknown>): number;
  succeeded(batch: Batch<unknown>, operation: string, start: number): void;
  /** Raises under `storeFailure: 'fail'`; under `'process'` marks the `affected` messages `failOpen`. */
  failed(
    batch: Batch<unknown>,
    operation: string,
    start: number,
    error: unknown,
    affected: readonly number[],
  ): void;
  /** A failure that changes nothing (a release: the claim lapses): observed, never raised. */
  ignored(batch: Batch<unknown>, operation: string, start: number, error: unknown): void;
}

/** The stream of `process`/`wrap` calls and of batches that name none. */
export const DEFAULT_STREAM = 'default';

/** True for a promise or any other thenable (what `await` would wait for). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}
