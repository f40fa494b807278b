import { ConfigError } from '../errors.js';

/**
 * Clock skew between this process and a shared store, for stores whose conditions cannot use the server's own time
 * (DynamoDB, Cassandra). Leases and retention there are judged by each worker's clock, so workers must agree:
 * a worker whose clock runs 61 s ahead sees a live 60 s claim of another worker as lapsed and takes it over.
 * Such stores measure the offset to the server once at connect and refuse (or warn) past a bound.
 */

/** What to do when the measured skew is beyond `maxClockSkewMs`: refuse to open, or warn and open. */
export type ClockSkewPolicy = 'fail' | 'warn';

/**
 * One reading of the server's clock. The server read its clock somewhere between `localBefore` and `localAfter`
 * (our clock, around the round trip) and its answer places its time in `[serverEarliest, serverLatest]` (equal for a
 * millisecond clock; a 1 s wide range for an HTTP `Date` header).
 */
export interface ClockSample {
  readonly localBefore: number;
  readonly localAfter: number;
  readonly serverEarliest: number;
  readonly serverLatest: number;
}

/** The range the offset `server − local` lies in, in ms, given what one sample can tell. */
export interface ClockOffset {
  readonly minMs: number;
  readonly maxMs: number;
}

/** The offset range of a sample: the round trip and the server clock's resolution both widen it. */
export function offsetOf(sample: ClockSample): ClockOffset {
  return {
    minMs: sample.serverEarliest - sample.localAfter,
    maxMs: sample.serverLatest - sample.localBefore,
  };
}

/** The narrowest of several samples' offsets (the one least widened by its round trip). */
export function narrowest(samples: readonly ClockSample[]): ClockOffset | undefined {
  let best: ClockOffset | undefined;
  for (const sample of samples) {
    const offset = offsetOf(sample);
    if (best === undefined || offset.maxMs - offset.minMs < best.maxMs - best.minMs) best = offset;
  }
  return best;
}

/** Settings of the check, as the store's options spell them. */
export interface ClockSkewCheck {
  /** Store name for messages, e.g. `cassandra`. */
  readonly store: string;
  /** Where the server is, for messages. */
  readonly where: string;
  readonly maxClockSkewMs: number;
  readonly onClockSkew: ClockSkewPolicy;
  readonly warn: (message: string) => void;
}

/**
 * Judges a measured offset. Only a skew that is beyond the bound whatever the measurement's uncertainty counts
 * (the smallest skew the range allows): a slow round trip or a coarse server clock never refuses a good clock.
 * Past the bound it throws a ConfigError naming `repository.maxClockSkewMs`, or warns with `onClockSkew: "warn"`.
 */
export function checkClockSkew(offset: ClockOffset, check: ClockSkewCheck): void {
  const skew = offset.minMs > 0 ? offset.minMs : offset.maxMs < 0 ? -offset.maxMs : 0;
  if (skew <= check.maxClockSkewMs) return;
  // A positive offset means the server is ahead, i.e. this process's clock is behind.
  const direction = offset.minMs > 0 ? 'behind' : 'ahead of';
  const message =
    `this process's clock is at least ${skew} ms ${direction} the ${check.store} server at ${check.where}; ` +
    `leases and retention are judged by each worker's own clock, so workers must agree within ` +
    `${check.maxClockSkewMs} ms or one may take over another's live claim. Fix the clock (NTP), or raise ` +
    'repository.maxClockSkewMs, or set repository.onClockSkew = "warn"';
  if (check.onClockSkew === 'warn') {
    check.warn(`${check.store}: repository.maxClockSkewMs: ${message}`);
    return;
  }
  throw new ConfigError('repository.maxClockSkewMs', message);
}
