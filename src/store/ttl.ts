import { ConfigError } from '../errors.js';

/**
 * The longest TTL, lease or minimum lifetime any store accepts when it declares no lower `maxTtlMs`: 100 years.
 * Past it, `now + ttl` leaves the range a Date can hold (and a store's own expiry arithmetic) long before it
 * means anything, and a typo (`99999999999999d`) would otherwise write a record that never expires or one that
 * has already expired.
 */
export const MAX_TTL_MS = 100 * 365 * 86_400_000;

/** The longest duration a repository keeps: its declared `maxTtlMs`, never above {@link MAX_TTL_MS}. */
export function maxDurationMs(maxTtlMs: number | undefined): number {
  return maxTtlMs === undefined ? MAX_TTL_MS : Math.min(maxTtlMs, MAX_TTL_MS);
}

/** The rule every store and entry point applies to a TTL or a lease, as a sentence for error messages. */
export function durationRule(max: number): string {
  return `must be a finite number of milliseconds greater than 0 and at most ${max} (${Math.floor(max / 86_400_000)} days)`;
}

/** True when `value` is a TTL or lease a store with this maximum keeps as given. */
export function isValidDuration(value: unknown, max: number): value is number {
  return typeof value === 'number' && value > 0 && value <= max;
}

/**
 * Refuses a duration that is not finite, not above 0 or above `max`, with a ConfigError naming the option
 * (`option ttlMs of redis add`). Every store checks its call options with it before it writes anything.
 */
export function checkDuration(option: string, value: unknown, max: number, where: string): void {
  if (isValidDuration(value, max)) return;
  throw new ConfigError(option, `${durationRule(max)}, got ${String(value)}`, {
    label: `option ${option} of ${where}`,
  });
}
