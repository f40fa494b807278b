import { ConfigError } from '../errors.js';

/**
 * The longest TTL, lease or minimum lifetime any store accepts when it declares no lower `maxTtlMs`: 100 years.
 * Past it `now + ttl` leaves a Date's range, and a typo would write a record that never or already expired.
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

/** Refuses a duration not above 0 or above `max`, with a ConfigError naming the option (`option ttlMs of …`). */
export function checkDuration(option: string, value: unknown, max: number, where: string): void {
  if (isValidDuration(value, max)) return;
  throw new ConfigError(option, `${durationRule(max)}, got ${String(value)}`, {
    label: `option ${option} of ${where}`,
  });
}
