import type { Outcome } from './types.js';

/** Running counts of outcomes, plus store trouble that the outcomes alone would hide. */
export interface ConsumerStats {
  processed: number;
  duplicate: number;
  inProgress: number;
  failed: number;
  /** Messages that reused an id with a different payload fingerprint (outcome `conflict`). */
  conflicts: number;
  noId: number;
  /** Messages handled as new, or left unrecorded, because a store call failed under the `process` policy. */
  failOpen: number;
  /** Claims that could not be released after a handler failure (they lapse with their lease). */
  releaseFailures: number;
  /** Eager: confirms refused because the lease had lapsed and another owner took the id (see `claimLost`). */
  claimsLost: number;
  /** Lazy: marks that found the id already marked by another worker since the check (see `raced`). */
  raced: number;
  /** Duplicates answered with a stored outcome (a value under `storeResult`, or a kept failure). */
  replayed: number;
  /** Processed messages whose value was not kept under `storeResult` (too large, or not serializable). */
  resultsNotKept: number;
  /** Eager: claims renewed while their handler ran (every third of the lease). */
  leaseRenewals: number;
  /** Eager: renewals refused (the claim lapsed and was taken over) or failed (the store did not answer). */
  leaseRenewalFailures: number;
}

/** Fresh zeroed counters. */
export function emptyStats(): ConsumerStats {
  return {
    processed: 0,
    duplicate: 0,
    inProgress: 0,
    failed: 0,
    conflicts: 0,
    noId: 0,
    failOpen: 0,
    releaseFailures: 0,
    claimsLost: 0,
    raced: 0,
    replayed: 0,
    resultsNotKept: 0,
    leaseRenewals: 0,
    leaseRenewalFailures: 0,
  };
}

/** Adds one outcome to the counters (a switch, not a table: a named field is faster to bump than a looked-up one). */
export function count(stats: ConsumerStats, outcome: Outcome): void {
  switch (outcome) {
    case 'processed':
      stats.processed++;
      return;
    case 'duplicate':
      stats.duplicate++;
      return;
    case 'in-progress':
      stats.inProgress++;
      return;
    case 'failed':
      stats.failed++;
      return;
    case 'conflict':
      stats.conflicts++;
      return;
    case 'no-id':
      stats.noId++;
      return;
  }
}
