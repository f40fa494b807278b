import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { HttpIdempotency } from './core.js';
import type { HttpIdempotencyOptions, HttpRequestView } from './options.js';
import type { HttpAnswer } from './problem.js';

/** The Express middleware, with the adapter behind it (its consumer's `stats`). */
export type IdempotencyKeyMiddleware = RequestHandler & { readonly idempotency: HttpIdempotency<Request> };

/**
 * Express middleware for the `Idempotency-Key` header. Mount it on a route after a body parser
 * (`app.post('/charges', express.json(), idempotencyKey({ repository }), handler)`) so keys are scoped to the
 * route pattern; mounted with `app.use` it scopes them to the request path.
 */
export function idempotencyKey(options: HttpIdempotencyOptions<Request>): IdempotencyKeyMiddleware {
  const idempotency = new HttpIdempotency<Request>(options);
  const middleware = (req: Request, res: Response, next: NextFunction): void => {
    idempotency.begin(expressView(req), res).then((verdict) => {
      if (verdict.kind === 'next') next();
      else writeAnswer(res, verdict.answer);
    }, next);
  };
  return Object.assign(middleware, { idempotency });
}

function expressView(req: Request): HttpRequestView<Request> {
  const routePath: unknown = req.route?.path;
  return {
    request: req,
    method: req.method,
    route: req.baseUrl + (typeof routePath === 'string' ? routePath : req.path),
    target: req.originalUrl,
    body: req.body,
    hasBody: hasBody(req.headers),
    header: (name) => req.headers[name],
  };
}

/** True when the request carries a body, by its framing headers (RFC 9112 §6.3). */
export function hasBody(headers: IncomingHttpHeaders): boolean {
  const length = headers['content-length'];
  return headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/** Writes a replay or a problem straight to Node's response (Node sets Content-Length from the body). */
export function writeAnswer(res: ServerResponse, answer: HttpAnswer): void {
  res.statusCode = answer.status;
  for (const [name, value] of Object.entries(answer.headers)) res.setHeader(name, value);
  res.end(answer.body);
}
