/**
 * The HTTP `Idempotency-Key` adapter (draft-ietf-httpapi-idempotency-key-header-07) for Express and Fastify,
 * both optional peer dependencies. Neither's types are imported (structural shapes stand for them), so a project
 * compiled with `skipLibCheck: false` needs neither installed to import this entry point. See docs/http.md.
 */
export type { CapturedResponse } from './capture.js';
export { HttpIdempotency, type HttpMessage, type HttpVerdict } from './core.js';
export {
  type ExpressNext,
  type ExpressRequestLike,
  type IdempotencyKeyMiddleware,
  idempotencyKey,
} from './express.js';
export {
  type FastifyReplyLike,
  type FastifyRequestLike,
  fastifyIdempotencyKey,
  type IdempotencyKeyHook,
} from './fastify.js';
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
