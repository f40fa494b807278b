import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { HttpIdempotency } from './core.js';
import { hasBody } from './express.js';
import type { HttpIdempotencyOptions, HttpRequestView } from './options.js';

/** The Fastify `preHandler` hook, with the adapter behind it (its consumer's `stats`). */
export type IdempotencyKeyHook = preHandlerAsyncHookHandler & {
  readonly idempotency: HttpIdempotency<FastifyRequest>;
};

/**
 * A Fastify `preHandler` hook for the `Idempotency-Key` header: on one route
 * (`app.post('/charges', { preHandler: hook }, handler)`) or on every route (`app.addHook('preHandler', hook)`).
 * Keys are scoped to the route pattern (`/charges/:id`). It runs after Fastify parsed the body.
 */
export function fastifyIdempotencyKey(options: HttpIdempotencyOptions<FastifyRequest>): IdempotencyKeyHook {
  const idempotency = new HttpIdempotency<FastifyRequest>(options);
  const hook = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> => {
    const verdict = await idempotency.begin(fastifyView(request), reply.raw);
    if (verdict.kind === 'next') return undefined;
    const { status, headers, body } = verdict.answer;
    // A Buffer payload is sent as is: no serializer touches the stored bytes. Returning the reply ends the
    // request here, as Fastify asks of an async hook that answers.
    return reply
      .code(status)
      .headers(headers as Record<string, string | string[]>)
      .send(body);
  };
  return Object.assign(hook, { idempotency }) as IdempotencyKeyHook;
}

function fastifyView(request: FastifyRequest): HttpRequestView<FastifyRequest> {
  return {
    request,
    method: request.method,
    route: request.routeOptions.url ?? request.url.split('?')[0] ?? request.url,
    target: request.url,
    body: request.body,
    hasBody: hasBody(request.headers),
    header: (name) => request.headers[name],
  };
}
