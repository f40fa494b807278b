import { errorMessage, RenewUnsupportedError } from '../errors.js';
import type { ClaimRef, IdempotentRepository, MessageId } from '../store/types.js';
import type { ConsumerStats } from './stats.js';
import type { ConsumerWarningCode, RenewalSignal } from './types.js';

/** Where a consumer's warnings go: its `onWarning` option, else a process warning. */
export type WarningSink = (message: string, code: ConsumerWarningCode) => void;

/** The default {@link WarningSink}: `process.emitWarning`, type `IdempotencyWarning`, with the code. */
export const processWarning: WarningSink = (message, code) =>
  process.emitWarning(message, { type: 'IdempotencyWarning', code });

/** The claims a batch holds while its handlers run: their ids and the batch's owner token. */
export interface HeldClaims {
  readonly owner: string;
  readonly ids: readonly MessageId[];
}

/** A batch the renewer can track: its slot among the tracked batches (-1: none; a slot, not a Map entry). */
export interface Renewable {
  renewalSlot: number;
  /** Stops its renewals early once aborted (e.g. the caller gave the work up). */
  renewalSignal: RenewalSignal | undefined;
}

/**
 * Renews the claims of running batches every third of the lease (owner-checked), so a handler that outlives the
 * lease keeps its claim; a failure is counted and warned about. One timer, running only while a batch is tracked.
 */
export class LeaseRenewer<R extends Renewable> {
  readonly #repository: IdempotentRepository;
  readonly #leaseMs: number;
  readonly #stats: ConsumerStats;
  readonly #heldOf: (run: R) => HeldClaims | undefined;
  readonly #warn: WarningSink;
  /** Running batches, unordered: an untracked batch's slot goes to the last one. */
  readonly #runs: (R | undefined)[] = [];
  /** How many batches are tracked: the first `#count` slots. */
  #count = 0;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** False once the repository said, or showed, that it cannot renew at all (and that was warned about). */
  #supported = true;

  constructor(
    repository: IdempotentRepository,
    leaseMs: number,
    stats: ConsumerStats,
    heldOf: (run: R) => HeldClaims | undefined,
    warn: WarningSink = processWarning,
  ) {
    this.#repository = repository;
    this.#leaseMs = leaseMs;
    this.#stats = stats;
    this.#heldOf = heldOf;
    this.#warn = warn;
  }

  /** Starts renewing the batch's claims until {@link untrack}, or until `signal` aborts. */
  track(run: R, signal: RenewalSignal | undefined): void {
    if (this.#repository.renew === undefined || !this.#supported) {
      this.#unsupported();
      return;
    }
    run.renewalSignal = signal;
    if (!this.#tracks(run)) {
      run.renewalSlot = this.#count;
      this.#runs[this.#count++] = run;
    }
    if (this.#timer === undefined) this.#startTimer();
  }

  /** Apart from `track`: a function that makes a closure allocates its context on every call. */
  #startTimer(): void {
    this.#timer = setInterval(() => this.#tick(), Math.max(1, Math.floor(this.#leaseMs / 3)));
    // Renewals serve running handlers; they never keep a process alive on their own.
    this.#timer.unref();
  }

  /** Stops renewing the batch's claims (before they are confirmed or released). */
  untrack(run: R): void {
    if (!this.#tracks(run)) return;
    const slot = run.renewalSlot;
    const last = --this.#count;
    if (slot !== last) {
      const moved = this.#runs[last] as R;
      this.#runs[slot] = moved;
      moved.renewalSlot = slot;
    }
    // Cleared, not popped: a pop to an empty array shrinks its storage, and the next track grows it again.
    this.#runs[last] = undefined;
    run.renewalSlot = -1;
    run.renewalSignal = undefined;
  }

  #tracks(run: R): boolean {
    const slot = run.renewalSlot;
    return slot >= 0 && slot < this.#count && this.#runs[slot] === run;
  }

  #tick(): void {
    if (this.#count === 0) {
      clearInterval(this.#timer);
      this.#timer = undefined;
      return;
    }
    // Backwards: untracking an aborted batch moves the last one into its place, which was already visited.
    for (let k = this.#count - 1; k >= 0; k--) {
      const run = this.#runs[k] as R;
      if (run.renewalSignal?.aborted) {
        this.untrack(run);
        continue;
      }
      const held = this.#heldOf(run);
      if (held === undefined) continue;
      for (const id of held.ids) this.#renew(run, { id, owner: held.owner });
    }
  }

  #renew(run: R, claim: ClaimRef): void {
    this.#repository.renew!(claim, { leaseMs: this.#leaseMs }).then(
      (renewed) => {
        // An answer that comes after the batch settled says nothing about a claim still held.
        if (!this.#tracks(run)) return;
        if (renewed) this.#stats.leaseRenewals++;
        else this.#failed(claim, 'the claim is no longer this worker’s (it lapsed and was taken over)');
      },
      (error: unknown) => {
        if (isRenewUnsupported(error)) {
          this.#stopUnsupported();
          return;
        }
        if (!this.#tracks(run)) return;
        this.#failed(claim, errorMessage(error));
      },
    );
  }

  #failed(claim: ClaimRef, reason: string): void {
    this.#stats.leaseRenewalFailures++;
    this.#warn(`lease renewal of id ${describeId(claim.id)} failed: ${reason}`, 'IDEM_LEASE_RENEWAL_FAILED');
  }

  /** The repository cannot renew at all: stop every renewal and say so once. */
  #stopUnsupported(): void {
    for (let k = 0; k < this.#count; k++) (this.#runs[k] as R).renewalSlot = -1;
    this.#runs.length = 0;
    this.#count = 0;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#unsupported();
  }

  #unsupported(): void {
    if (!this.#supported) return;
    this.#supported = false;
    this.#warn(
      'the repository cannot renew a lease (it has no renew(), or no doRenew of its own): a handler that runs ' +
        'longer than leaseMs loses its claim, and another worker may run the same message; implement renew ' +
        '(BaseRepository: doRenew) or size the lease above your slowest handler',
      'IDEM_LEASE_RENEWAL_UNSUPPORTED',
    );
  }
}

/** By name as well: a store built against the package's other module format has its own copy of the class. */
function isRenewUnsupported(error: unknown): boolean {
  return (
    error instanceof RenewUnsupportedError ||
    (error instanceof Error && error.name === 'RenewUnsupportedError')
  );
}

function describeId(id: MessageId): string {
  return typeof id === 'string' ? JSON.stringify(id.length > 80 ? `${id.slice(0, 77)}...` : id) : 'of bytes';
}
