/** Exponential backoff settings (see `kafkaAdapterDefaults.retry` for the defaults). */
export interface BackoffOptions {
  /** Delay after the first failure, in ms. */
  readonly initialMs: number;
  /** Cap on any delay, in ms. */
  readonly maxMs: number;
  /** Growth per failure. */
  readonly multiplier: number;
  /** Fraction (0..1) taken off at random, so partitions that failed together do not retry in lockstep. */
  readonly jitter: number;
}

/** Delay before the next try after `failures` consecutive failures (1 = the first failure). */
export function backoffMs(
  failures: number,
  options: BackoffOptions,
  random: () => number = Math.random,
): number {
  const exponent = Math.max(0, failures - 1);
  const base = Math.min(options.maxMs, options.initialMs * options.multiplier ** exponent);
  return Math.max(1, Math.round(base * (1 - options.jitter * random())));
}

/** Why a partition stopped at a record. */
export type BlockKind =
  /** The handler threw: counts towards `maxAttempts`, then the DLQ. */
  | 'handler'
  /** Another worker holds a live claim on the id: wait for it to confirm or its lease to lapse. */
  | 'in-progress'
  /** The store or the DLQ write failed: not the record's fault, so it never goes to the DLQ for it. */
  | 'infra'
  /** The record can never be handled (bad id, refused by the consumer) and there is no DLQ to put it in. */
  | 'poison';

/**
 * What one partition remembers about the record it is stuck at, so a re-fetched record resumes its counts.
 * A partition handles its records in order, so there is at most one such record per partition.
 */
export class BlockedRecord {
  /** Handler failures so far; these decide the DLQ. */
  handlerFailures = 0;
  /** Waits for another worker or for the infrastructure; these only grow the backoff. */
  waits = 0;

  constructor(readonly offset: string) {}

  /** Counts one more block of this kind and returns the count that sets the backoff. */
  count(kind: BlockKind): number {
    if (kind === 'handler') return ++this.handlerFailures;
    return ++this.waits;
  }
}
