/**
 * The HTTP `Idempotency-Key` adapter (draft-ietf-httpapi-idempotency-key-header-07) for Express and Fastify,
 * both optional peer dependencies: only their types are imported here. See docs/http.md.
 */
export type { CapturedResponse } from './capture.js';
export { HttpIdempotency, type HttpMessage, type HttpVerdict } from './core.js';
export { type IdempotencyKeyMiddleware, idempotencyKey } from './express.js';
export { fastifyIdempotencyKey, type IdempotencyKeyHook } from './fastify.js';
export { canonicalJson, requestFingerprint } from './fingerprint.js';
export { type KeyReading, readIdempotencyKey, scopedId } from './key.js';
export {
  type HttpIdempotencyOptions,
  type HttpRequestView,
  httpIdempotencyDefaults,
  type ResolvedHttpIdempotencyOptions,
} from './options.js';
export {
  type HttpAnswer,
  PROBLEM_CONTENT_TYPE,
  type ProblemKind,
  problemKinds,
  problemType,
} from './problem.js';
