import { z } from 'zod';
import { ConfigError } from '../errors.js';

/*
 * Clock skew to a shared store whose conditions cannot use the server's time (DynamoDB, Cassandra): a worker 61 s
 * ahead sees another's live 60 s claim as lapsed, so such stores measure the offset at open and refuse or warn.
 */

/** Defaults of the check's options, shared by the stores that run it. */
export const clockSkewDefaults = { maxClockSkewMs: 2_000, onClockSkew: 'fail' } as const;

/** The check's config keys, for a store's options schema. */
export const clockSkewFields = {
  maxClockSkewMs: z.number().int().min(0).default(clockSkewDefaults.maxClockSkewMs),
  onClockSkew: z.enum(['fail', 'warn']).default(clockSkewDefaults.onClockSkew),
};

/**
 * One reading of the server's clock: it read its clock between `localBefore` and `localAfter` (our clock), and its
 * answer places its time in `[serverEarliest, serverLatest]` (equal for a ms clock, 1 s wide for an HTTP `Date`).
 */
export interface ClockSample {
  readonly localBefore: number;
  readonly localAfter: number;
  readonly serverEarliest: number;
  readonly serverLatest: number;
}

/** The range (ms) the offset `server − local` of a sample lies in: its round trip and the clock's resolution widen it. */
export function offsetOf(sample: ClockSample) {
  return {
    minMs: sample.serverEarliest - sample.localAfter,
    maxMs: sample.serverLatest - sample.localBefore,
  };
}

type ClockOffset = ReturnType<typeof offsetOf>;

/** The narrowest of several samples' offsets (the one least widened by its round trip). */
export function narrowest(samples: readonly ClockSample[]): ClockOffset | undefined {
  let best: ClockOffset | undefined;
  for (const sample of samples) {
    const offset = offsetOf(sample);
    if (best === undefined || offset.maxMs - offset.minMs < best.maxMs - best.minMs) best = offset;
  }
  return best;
}

/** Settings of the check: the store's options, its name and where the server is (for messages). */
interface ClockSkewCheck {
  readonly store: string;
  readonly where: string;
  readonly maxClockSkewMs: number;
  /** Past the bound: refuse to open, or warn and open. */
  readonly onClockSkew: 'fail' | 'warn';
  readonly warn: (message: string) => void;
}

/**
 * Judges a measured offset by the smallest skew its range allows, so a slow round trip or a coarse server clock
 * never refuses a good clock. Past the bound: a ConfigError on `repository.maxClockSkewMs`, or a warning.
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
  if (check.onClockSkew !== 'warn') throw new ConfigError('repository.maxClockSkewMs', message);
  check.warn(`${check.store}: repository.maxClockSkewMs: ${message}`);
}

/** Checks the narrowest of the samples taken; with none, warns that the skew goes unchecked (`unread`: why). */
export function checkSampledClock(
  samples: readonly (ClockSample | undefined)[],
  check: ClockSkewCheck,
  unread: string,
): void {
  const offset = narrowest(samples.filter((sample) => sample !== undefined));
  if (offset === undefined) check.warn(`${check.store}: ${unread}; the clock skew to it is not checked`);
  else checkClockSkew(offset, check);
}
