import type { CapturedResponse } from './capture.js';

/**
 * Problem Details (RFC 9457) for the adapter's own answers. Each kind has a stable `type` URI (a `tag:` URI,
 * which RFC 9457 allows for types that need not resolve), a `title`, a status and a `detail` saying what to do.
 */
export const problemKinds = {
  'key-missing': { status: 400, title: 'Idempotency-Key header missing' },
  'key-invalid': { status: 400, title: 'Idempotency-Key header invalid' },
  'body-not-parsed': { status: 500, title: 'Request body not parsed' },
  'in-progress': { status: 409, title: 'A request with this Idempotency-Key is being processed' },
  'response-not-kept': { status: 409, title: 'The response to this Idempotency-Key was not kept' },
  'key-reused': { status: 422, title: 'Idempotency-Key reused with a different request' },
  'store-unavailable': { status: 503, title: 'Idempotency store unavailable' },
  'response-unreadable': { status: 500, title: 'The stored response to this Idempotency-Key cannot be read' },
} as const;

/** One of the adapter's problems. */
export type ProblemKind = keyof typeof problemKinds;

/** The media type of every error the adapter writes. */
export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** The `type` URI of a problem kind. */
export function problemType(kind: ProblemKind): string {
  return `tag:idempotent-consumer,2026:http:${kind}`;
}

/** An answer the adapter writes itself: a replay or a problem, in a kept response's shape. */
export type HttpAnswer = CapturedResponse;

/** A problem+json answer; `headers` adds e.g. `Retry-After`. */
export function problemAnswer(
  kind: ProblemKind,
  detail: string,
  headers: Readonly<Record<string, string>> = {},
): HttpAnswer {
  const { status, title } = problemKinds[kind];
  const body = Buffer.from(JSON.stringify({ type: problemType(kind), title, status, detail }));
  return { status, headers: { 'content-type': PROBLEM_CONTENT_TYPE, ...headers }, body };
}
