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

/** A duration as config writes it: `500ms`, `3s`, `1.5s`, `2m`, `3h`. */
export function formatDuration(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000}h`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000}m`;
  return ms >= 1_000 ? `${ms / 1_000}s` : `${ms}ms`;
}

/**
 * A zod schema for a duration given as ms or as a string like `24h`; the output is ms. It must be positive
 * unless `allowZero`; `integer` refuses fractions of a ms.
 */
export function durationSchema(
  options: { readonly allowZero?: boolean; readonly integer?: boolean; readonly max?: number } = {},
) {
  const expectation = `must be a duration like "5s" or a number of ms${options.allowZero ? ' (0 allowed)' : ''}`;
  return z
    .union([z.number(), z.string()], {
      error: (issue) => (issue.input === undefined ? 'is required' : expectation),
    })
    .transform((value, ctx) => {
      const ms = parseDuration(value);
      const tooSmall = ms !== undefined && (options.allowZero ? ms < 0 : ms <= 0);
      let message: string | undefined;
      if (ms === undefined || tooSmall || (options.integer && !Number.isInteger(ms))) {
        message = tooSmall ? `must be ${options.allowZero ? 'at least 0' : 'longer than 0'}` : expectation;
      } else if (options.max !== undefined && ms > options.max) {
        message = `must be at most ${options.max} ms (${Math.floor(options.max / 86_400_000)} days)`;
      }
      if (ms !== undefined && message === undefined) return ms;
      ctx.addIssue({ code: 'custom', message });
      return z.NEVER;
    });
}

/** A zod schema for a positive duration given as ms or as a string like `24h`; the output is ms. */
export const durationMs = durationSchema();
