import type { Outcome } from './types.js';

export function emptyStats() {
  return {
    processed: 0,
    duplicate: 0,
    inProgress: 0,
    failed: 0,
    /** Messages that reused an id with a different payload fingerprint (outcome `conflict`). */
    conflicts: 0,
    noId: 0,
    /** Messages handled as new, or left unrecorded, because a store call failed under the `process` policy. */
    failOpen: 0,
    /** Claims that could not be released after a handler failure (they lapse with their lease). */
    releaseFailures: 0,
    /** Eager: confirms refused because the lease had lapsed and another owner took the id (see `claimLost`). */
    claimsLost: 0,
    /** Lazy: marks that found the id already marked by another worker since the check (see `raced`). */
    raced: 0,
    /** Duplicates answered with a stored outcome (a value under `storeResult`, or a kept failure). */
    replayed: 0,
    /** Processed messages whose value was not kept under `storeResult` (too large, or not serializable). */
    resultsNotKept: 0,
    /** Eager: claims renewed while their handler ran (every third of the lease). */
    leaseRenewals: 0,
    /** Eager: renewals refused (the claim lapsed and was taken over) or failed (the store did not answer). */
    leaseRenewalFailures: 0,
  };
}

/** Running counts of outcomes, plus store trouble that the outcomes alone would hide. */
export type ConsumerStats = ReturnType<typeof emptyStats>;

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
