/**
 * The bound of issue #34's HTTP row, shared by bench:http and bench/http-instructions.ts: the example's
 * `POST /charges` behind the least a key middleware can do.
 */
import { hash } from 'node:crypto';
import express, { type Express } from 'express';
import { demoTokens } from '../examples/http/server.js';

/**
 * The example's `POST /charges` behind the least a key middleware can do: the adapter's store id and request
 * fingerprint, one Map for the records, a replay answered from the Map, and `end` wrapped to keep the response
 * as it goes out. Not a design to ship (nothing held back until stored, no lease, no conflict answer, no size
 * cap): the bound that any adapter on this route pays.
 */
export function boundApp(): Express {
  let count = 0;
  const app = express();
  const userOf = (req: express.Request) =>
    demoTokens[/^Bearer (\S+)$/.exec(req.get('authorization') ?? '')?.[1] ?? ''];
  const records = new Map<string, { fingerprint: string; response: string | undefined }>();
  const guard: express.RequestHandler = (req, res, next) => {
    if (userOf(req) === undefined) {
      res.status(401).end();
      return;
    }
    const key = req.get('idempotency-key');
    const id = JSON.stringify(['http', req.method, req.baseUrl + req.route.path, userOf(req), key]);
    const fingerprint = hash(
      'sha256',
      `${req.method}\0${req.originalUrl}\0j${JSON.stringify(req.body)}`,
      'base64url',
    );
    const held = records.get(id);
    if (held !== undefined) {
      res.statusCode = held.fingerprint === fingerprint && held.response !== undefined ? 201 : 409;
      res.setHeader('content-type', 'application/json; charset=utf-8');
      res.end(held.response);
      return;
    }
    const record: { fingerprint: string; response: string | undefined } = {
      fingerprint,
      response: undefined,
    };
    records.set(id, record);
    const end = res.end;
    res.end = function (this: express.Response, ...args: unknown[]) {
      record.response = String(args[0]);
      res.end = end;
      return Reflect.apply(end, this, args);
    } as typeof res.end;
    next();
  };
  app.post('/charges', express.json(), guard, (req, res) => {
    count++;
    const id = `ch_${count}`;
    const { amount = 0, currency = 'eur' } = (req.body ?? {}) as { amount?: number; currency?: string };
    res.status(201).location(`/charges/${id}`).json({ id, amount, currency });
  });
  return app;
}
