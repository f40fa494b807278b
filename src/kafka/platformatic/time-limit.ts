import { TimeoutError } from '@platformatic/kafka';

/*
 * A bound on the port's own read steps (the positions: metadata, OffsetFetch, two ListOffsets, each retried),
 * which can hang for minutes while nothing is read: past it the step fails, warning, and recovery runs. Only
 * reads: giving up on a commit or heartbeat costs a rebalance or a batch read twice.
 */

/** Twice the request timeout, at least 60 s: a loaded broker coming back can take tens of seconds to answer. */
export function stepLimitMs(requestTimeout: number | undefined): number {
  return Math.max(60_000, 2 * (requestTimeout ?? 30_000));
}

/** A step that did not finish within its limit (the library's TimeoutError: retriable, "broker unreachable"). */
export class StepTimeoutError extends TimeoutError {
  constructor(
    readonly step: string,
    readonly limitMs: number,
  ) {
    super(`${step} did not finish within ${limitMs / 1000} s`, { canRetry: true });
  }
}

/** `work`, or past `limitMs` a warning and a {@link StepTimeoutError} (the work, uncancellable, is left). */
export async function timeLimited<T>(
  step: string,
  work: Promise<T>,
  options: {
    readonly limitMs: number;
    readonly warn: (message: string, fields: Record<string, unknown>) => void;
  },
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new StepTimeoutError(step, options.limitMs);
      options.warn(`${error.message}; giving up on it`, { step, limitMs: options.limitMs });
      reject(error);
    }, options.limitMs);
  });
  work.catch(() => undefined);
  try {
    return await Promise.race([work, limit]);
  } finally {
    clearTimeout(timer);
  }
}
