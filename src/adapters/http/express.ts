import type { IncomingMessage, ServerResponse } from 'node:http';
import { endWith } from './capture.js';
import { HttpIdempotency, RequestView } from './core.js';
import type { HttpIdempotencyOptions } from './options.js';

/** The parts of Express's `Request` the middleware reads (Express's Request fits). */
export interface ExpressRequestLike extends IncomingMessage {
  readonly method: string;
  readonly baseUrl: string;
  readonly path: string;
  readonly originalUrl: string;
  /** Express sets it to the matched route; its `path` is the route pattern (`/charges/:id`). */
  readonly route?: { readonly path?: unknown } | undefined;
  /** The parsed body, when a body parser ran before the middleware. */
  readonly body?: unknown;
}

/** Express's `next`: called with nothing to go on, with an error to fail the request. */
export type ExpressNext = (error?: unknown) => void;

/** The Express middleware, with the adapter behind it (its consumer's `stats`). */
export type IdempotencyKeyMiddleware<Req extends ExpressRequestLike = ExpressRequestLike> = ((
  req: Req,
  res: ServerResponse,
  next: ExpressNext,
) => void) & { readonly idempotency: HttpIdempotency<Req> };

/**
 * Express middleware for the `Idempotency-Key` header. Mount it on a route after a body parser
 * (`app.post('/charges', express.json(), idempotencyKey({ repository }), handler)`) so keys are scoped to the
 * route pattern; mounted with `app.use` it scopes them to the request path. `Req` is the request type the
 * `scope` and `onError` hooks receive: `idempotencyKey<Request>(…)` for Express's own (or your augmented) one.
 */
export function idempotencyKey<Req extends ExpressRequestLike = ExpressRequestLike>(
  options: HttpIdempotencyOptions<Req>,
): IdempotencyKeyMiddleware<Req> {
  const idempotency = new HttpIdempotency<Req>(options);
  const middleware = (req: Req, res: ServerResponse, next: ExpressNext): void => {
    const routePath: unknown = req.route?.path;
    const route = req.baseUrl + (typeof routePath === 'string' ? routePath : req.path);
    // Callbacks, not a promise: a new key on a store that answers at once runs the route in this tick.
    idempotency.decide(
      new RequestView(req, route, req.originalUrl),
      res,
      (verdict) => {
        if (verdict.kind === 'next') return next();
        // A replay or a problem, written straight to Node's response (Node sets Content-Length from the body).
        const { status, headers, body } = verdict.answer;
        res.statusCode = status;
        for (const name in headers) res.setHeader(name, headers[name] as string | readonly string[]);
        endWith(res, body);
      },
      next,
    );
  };
  return Object.assign(middleware, { idempotency });
}
