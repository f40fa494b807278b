import { z } from 'zod';

/**
 * The longest delay Node's timers take (2^31 − 1 ms, about 24.8 days): a longer one fires after 1 ms, with only a
 * warning. PostgreSQL's `lock_timeout` and `statement_timeout` have the same bound (a 32-bit int of ms), and a
 * larger value is refused by the server at the first connection, which reads as a connection failure.
 */
export const MAX_TIMER_MS = 2_147_483_647;

/** A duration in whole ms that a timer or a 32-bit server setting can hold; `min` 0 or 1. */
export function timerMs(min: 0 | 1 = 1) {
  const whole = z.number().int();
  return (min === 1 ? whole.positive() : whole.min(0)).max(MAX_TIMER_MS, {
    error: `must be at most ${MAX_TIMER_MS} ms (2^31 - 1, about 24.8 days)`,
  });
}

/**
 * Refuses a URL whose user name, password or database path holds a `%` not followed by two hex digits: the
 * drivers that decode them (mysql2, ioredis) throw a bare `URIError` naming no setting at the first connection.
 */
export function refuseBadPercentEscapes(url: string | undefined, ctx: z.RefinementCtx): void {
  // An unparsable URL is reported by the URL check itself.
  if (url === undefined || !URL.canParse(url)) return;
  const { username, password, pathname: path } = new URL(url);
  for (const [part, text] of Object.entries({ 'user name': username, password, path })) {
    try {
      decodeURIComponent(text);
    } catch {
      ctx.addIssue({
        code: 'custom',
        message: `has a malformed %-escape in its ${part} (write a literal "%" as %25)`,
      });
      return;
    }
  }
}
