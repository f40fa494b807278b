/**
 * KIP-655's interval arithmetic in one place. All times are epoch ms, whole numbers.
 *
 * Stream time is the largest valid event timestamp seen so far on a stream. A forwarded record is kept while
 * its timestamp is not older than `streamTime − interval` and purged after; a record older than that when it
 * arrives is "late by strictly more than the interval" and is never kept.
 */

/** True while a forwarded record at `eventTime` is kept at `streamTime` (the bound itself is kept). */
export function retained(eventTime: number, streamTime: number, intervalMs: number): boolean {
  return eventTime >= streamTime - intervalMs;
}

/** True when two timestamps are within the interval of each other, both bounds inclusive. */
export function within(a: number, b: number, intervalMs: number): boolean {
  return Math.abs(a - b) <= intervalMs;
}

/** The first stream time at which a record at `eventTime` is purged: the store's `expiresAt` in stream time. */
export function purgedAt(eventTime: number, intervalMs: number): number {
  return eventTime + intervalMs + 1;
}

/**
 * Stream time per stream, in memory: each consumer instance keeps its own, one per `BatchOptions.stream`
 * (a Kafka partition). Stream time only moves forward.
 */
export class StreamTimes {
  readonly #times = new Map<string, number>();

  /** The stream's time, undefined before its first valid timestamp. */
  get(stream: string): number | undefined {
    return this.#times.get(stream);
  }

  /** Raises the stream's time to `time` if that is later; an earlier time changes nothing. */
  advance(stream: string, time: number): void {
    const current = this.#times.get(stream);
    if (current === undefined || time > current) this.#times.set(stream, time);
  }

  /** Every stream's time, e.g. to save them with committed offsets and restore them after a restart. */
  entries(): IterableIterator<[string, number]> {
    return this.#times.entries();
  }
}
