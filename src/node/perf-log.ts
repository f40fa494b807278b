/**
 * The phases of the node's wall time, in a chunk's order: `poll` (all time outside the batch handler), `parse`,
 * `lookup` (store read), `produce` (building output records), `deliver` (requests until acked), `mark`, `commit`.
 */
export const PHASES = ['poll', 'parse', 'lookup', 'produce', 'deliver', 'mark', 'commit'] as const;
export type Phase = (typeof PHASES)[number];

export interface PerfSummary {
  readonly seconds: number;
  readonly rowsIn: number;
  readonly rowsOut: number;
  readonly dropped: number;
  readonly iterations: number;
  readonly starved: number;
  /** Seconds and percent of the interval per phase. Percentages need not sum to 100: the rest is in no phase. */
  readonly phases: Record<Phase, { seconds: number; percent: number }>;
}

/** Where the node's wall clock goes, so a slow node says whether the broker, the store or the output is to blame. */
export class PerfLog {
  #start = performance.now();
  #phases = zeroPhases();
  #counts = zeroCounts();
  /** Time inside the batch handler this interval, and when the handler was entered if it is running now. */
  #handlerMs = 0;
  #enteredAt: number | undefined;

  /** Adds elapsed ms to a phase (not `poll`, which is the time outside the handler). */
  add(phase: Exclude<Phase, 'poll'>, ms: number): void {
    this.#phases[phase] += ms;
  }

  /** The batch handler starts: time from here to {@link leave} is not `poll`. */
  enter(): void {
    this.#enteredAt = performance.now();
  }

  leave(): void {
    if (this.#enteredAt === undefined) return;
    this.#handlerMs += performance.now() - this.#enteredAt;
    this.#enteredAt = undefined;
  }

  rows(rowsIn: number, rowsOut: number, dropped: number): void {
    this.#counts.rowsIn += rowsIn;
    this.#counts.rowsOut += rowsOut;
    this.#counts.dropped += dropped;
  }

  /** Counts one fetch round; `starved` when the previous round brought no records (the topic was drained). */
  iteration(starved: boolean): void {
    this.#counts.iterations++;
    if (starved) this.#counts.starved++;
  }

  /** Summarises the interval so far and starts a new one. */
  flush(): PerfSummary {
    const now = performance.now();
    const seconds = (now - this.#start) / 1000;
    const inHandler = this.#enteredAt === undefined ? 0 : now - this.#enteredAt;
    this.#phases.poll = Math.max(0, now - this.#start - this.#handlerMs - inHandler);
    const phases = {} as PerfSummary['phases'];
    for (const phase of PHASES) {
      const s = this.#phases[phase] / 1000;
      phases[phase] = { seconds: round(s, 3), percent: seconds > 0 ? Math.round((s / seconds) * 100) : 0 };
    }
    const summary: PerfSummary = { seconds: round(seconds, 2), ...this.#counts, phases };
    this.#start = now;
    this.#phases = zeroPhases();
    this.#handlerMs = 0;
    if (this.#enteredAt !== undefined) this.#enteredAt = now;
    this.#counts = zeroCounts();
    return summary;
  }
}

/** The one-line text form, like the seed's: `poll=4.43s (44%) parse=0.48s (5%) …`. */
export function formatPerf(summary: PerfSummary): string {
  const phases = PHASES.map(
    (p) => `${p}=${summary.phases[p].seconds.toFixed(2)}s (${summary.phases[p].percent}%)`,
  );
  return (
    `dedup perf over ${summary.seconds}s: ${summary.rowsIn} rows in, ${summary.rowsOut} out (${summary.dropped} dropped), ` +
    `${summary.iterations} iterations (${summary.starved} input-starved); ${phases.join(' ')}`
  );
}

function zeroCounts() {
  return { rowsIn: 0, rowsOut: 0, dropped: 0, iterations: 0, starved: 0 };
}

function zeroPhases(): Record<Phase, number> {
  return Object.fromEntries(PHASES.map((phase) => [phase, 0])) as Record<Phase, number>;
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
