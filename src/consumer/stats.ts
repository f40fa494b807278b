import type { Outcome } from './types.js';

/** Running counts of outcomes, plus store trouble that the outcomes alone would hide. */
export interface ConsumerStats {
  processed: number;
  duplicate: number;
  inProgress: number;
  failed: number;
  noId: number;
  /** Messages handled as new because the store failed under the `process` policy. */
  failOpen: number;
  /** Claims that could not be released after a handler failure (they lapse with their lease). */
  releaseFailures: number;
}

/** Fresh zeroed counters. */
export function emptyStats(): ConsumerStats {
  return { processed: 0, duplicate: 0, inProgress: 0, failed: 0, noId: 0, failOpen: 0, releaseFailures: 0 };
}

const FIELD: Record<Outcome, keyof ConsumerStats> = {
  processed: 'processed',
  duplicate: 'duplicate',
  'in-progress': 'inProgress',
  failed: 'failed',
  'no-id': 'noId',
};

/** Adds one outcome to the counters. */
export function count(stats: ConsumerStats, outcome: Outcome): void {
  stats[FIELD[outcome]]++;
}
