import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import { endWith } from './capture.js';
import { HttpIdempotency } from './core.js';
import type { HttpIdempotencyOptions, HttpRequestView } from './options.js';
import type { HttpAnswer } from './problem.js';

// Express's own types are not imported: a project that compiles its node_modules (`skipLibCheck: false`) would
// then need @types/express to import this entry point, and a Fastify user would too. Express's Request and
// Response fit these shapes, so the middleware mounts on any route; `idempotencyKey<Request>(…)` hands the hooks
// Express's own request type.

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
    // Callbacks, not a promise: a new key on a store that answers at once runs the route in this tick.
    idempotency.decide(
      new ExpressView(req),
      res,
      (verdict) => {
        if (verdict.kind === 'next') next();
        else writeAnswer(res, verdict.answer);
      },
      next,
    );
  };
  return Object.assign(middleware, { idempotency });
}

/**
 * What the adapter reads of an Express request. A class, not an object literal: `header` is then one shared
 * method rather than a closure made per request.
 */
class ExpressView<Req extends ExpressRequestLike> implements HttpRequestView<Req> {
  readonly method: string;
  readonly route: string;
  readonly target: string;
  readonly body: unknown;
  readonly hasBody: boolean;

  constructor(readonly request: Req) {
    const routePath: unknown = request.route?.path;
    this.method = request.method;
    this.route = request.baseUrl + (typeof routePath === 'string' ? routePath : request.path);
    this.target = request.originalUrl;
    this.body = request.body;
    this.hasBody = hasBody(request.headers);
  }

  header(name: string): string | string[] | undefined {
    return this.request.headers[name];
  }
}

/** True when the request carries a body, by its framing headers (RFC 9112 §6.3). */
export function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Writes a replay or a problem straight to Node's response (Node sets Content-Length from the body). */
export function writeAnswer(res: ServerResponse, answer: HttpAnswer): void {
  res.statusCode = answer.status;
  const { headers } = answer;
  for (const name in headers) res.setHeader(name, headers[name] as string | readonly string[]);
  endWith(res, answer.body);
}
