import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { HttpIdempotency, RequestView } from './core.js';
import type { HttpIdempotencyOptions } from './options.js';

/** The parts of Fastify's `FastifyRequest` the hook reads (FastifyRequest fits). */
export interface FastifyRequestLike {
  readonly method: string;
  /** Path and query as sent. */
  readonly url: string;
  /** The matched route; its `url` is the route pattern (`/charges/:id`). */
  readonly routeOptions: { readonly url?: string | undefined };
  readonly body: unknown;
  readonly headers: IncomingHttpHeaders;
}

/** The parts of Fastify's `FastifyReply` the hook uses (FastifyReply fits). */
export interface FastifyReplyLike {
  readonly raw: ServerResponse;
  code(statusCode: number): FastifyReplyLike;
  headers(values: Record<string, string | string[]>): FastifyReplyLike;
  send(payload?: unknown): FastifyReplyLike;
}

/** The Fastify `preHandler` hook, with the adapter behind it (its consumer's `stats`). */
export type IdempotencyKeyHook<Req extends FastifyRequestLike = FastifyRequestLike> = ((
  request: Req,
  reply: FastifyReplyLike,
) => Promise<FastifyReplyLike | undefined>) & {
  readonly idempotency: HttpIdempotency<Req>;
};

/**
 * A Fastify `preHandler` hook for the `Idempotency-Key` header: on one route
 * (`app.post('/charges', { preHandler: hook }, handler)`) or on every route (`app.addHook('preHandler', hook)`).
 * Keys are scoped to the route pattern (`/charges/:id`). It runs after Fastify parsed the body. `Req` is the
 * request type the `scope` and `onError` hooks receive: `fastifyIdempotencyKey<FastifyRequest>(…)` for Fastify's.
 */
export function fastifyIdempotencyKey<Req extends FastifyRequestLike = FastifyRequestLike>(
  options: HttpIdempotencyOptions<Req>,
): IdempotencyKeyHook<Req> {
  const idempotency = new HttpIdempotency<Req>(options);
  const hook = async (request: Req, reply: FastifyReplyLike): Promise<FastifyReplyLike | undefined> => {
    const route = request.routeOptions.url ?? (request.url.split('?')[0] as string);
    const verdict = await idempotency.begin(new RequestView(request, route, request.url), reply.raw);
    if (verdict.kind === 'next') return undefined;
    const { status, headers, body } = verdict.answer;
    // A Buffer payload is sent as is: no serializer touches the stored bytes. Returning the reply ends the
    // request here, as Fastify asks of an async hook that answers.
    return reply
      .code(status)
      .headers(headers as Record<string, string | string[]>)
      .send(body);
  };
  return Object.assign(hook, { idempotency });
}
