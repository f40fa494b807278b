import { z } from 'zod';

const UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/;

/** Parses `250ms`, `10s`, `5m`, `24h`, `7d` (or a plain number of ms) into milliseconds; undefined if malformed. */
export function parseDuration(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  const match = DURATION.exec(value.trim());
  if (!match) return undefined;
  return Math.round(Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS]);
}

/** A zod schema for a positive duration given as ms or as a string like `24h`; the output is ms. */
export const durationMs = z.union([z.number(), z.string()]).transform((value, ctx) => {
  const ms = parseDuration(value);
  if (ms === undefined || ms <= 0) {
    ctx.addIssue({
      code: 'custom',
      message: `expected a positive duration such as 500ms, 30s, 5m, 24h or 7d, got ${JSON.stringify(value)}`,
    });
    return z.NEVER;
  }
  return ms;
});
