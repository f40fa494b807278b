import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import express from 'express';
import Fastify from 'fastify';
import { fastifyIdempotencyKey, idempotencyKey } from '../../../src/adapters/http/index.js';
import type { HttpIdempotencyOptions } from '../../../src/adapters/http/options.js';
import { RepositoryClosedError } from '../../../src/errors.js';
import type { IdempotentRepository } from '../../../src/store/types.js';

/** A test server on an ephemeral loopback port, and the side effects its routes made. */
export interface TestApp {
  readonly url: string;
  /** Side effects per route, counted inside the route. */
  readonly effects: Record<string, number>;
  close(): Promise<void>;
}

/** Every byte value, then the run number: a body no text decoding would survive, different on each run. */
export function binaryChunks(run: number): Buffer[] {
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  return [all.subarray(0, 100), all.subarray(100), Buffer.from([0xc3, 0x28, run])];
}

/**
 * What `POST /partial` writes before it fails: a whole HTTP response, so a client that reads past the adapter's
 * framing would take it for the next response on the connection.
 */
export const INJECTION = 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 8\r\n\r\nINJECTED';

/** The web frameworks the adapter supports. */
export type Framework = 'express' | 'fastify';

/** The header a charge's response carries; kept and replayed because the tests ask for it. */
export const CHARGE_HEADER = 'x-charge-id';

// How long the charge route takes: long enough that 50 concurrent requests overlap the first one.
const WORK_MS = 50;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts an app with the same routes on either framework:
 * - `POST /charges`: one side effect, 201 with a JSON body and the `x-charge-id` header;
 * - `POST /flaky`: 500 on its first run, 201 afterwards;
 * - `POST /rejects`: 400 (a client error, kept by default);
 * - `POST /hang`: a side effect, then no answer until the app closes (a crashed request; `close` ends it, so
 *   no route of a closed app runs on, renewing its claim);
 * - `POST /open`: like /charges, with the key optional;
 * - `POST /bytes`: a binary body (every byte value, invalid UTF-8 included) written in several chunks;
 * - `POST /partial`: writes part of its body ({@link INJECTION}), then fails with the status in the
 *   `x-fail-status` header (500 without it), through the framework's own error handler;
 * - `POST /slow`: a side effect, then an answer after the `x-work-ms` header's milliseconds;
 * - `POST /unscoped`: like /charges, behind an adapter without a `scope` hook (the default configuration);
 * - `GET /ping`: `pong`, outside the adapter.
 * `scope` reads the principal from the `x-user` header.
 */
export async function startApp(
  framework: Framework,
  options: Omit<HttpIdempotencyOptions, 'scope'>,
): Promise<TestApp> {
  const effects: Record<string, number> = {
    charges: 0,
    flaky: 0,
    rejects: 0,
    hang: 0,
    open: 0,
    bytes: 0,
    partial: 0,
    unscoped: 0,
    slow: 0,
  };
  const count = (route: string) => {
    effects[route] = (effects[route] ?? 0) + 1;
    return effects[route];
  };
  const failStatus = (value: unknown) => Number(value ?? 500);
  const charge = (body: unknown) => {
    effects.charges = (effects.charges ?? 0) + 1;
    return { id: `ch_${effects.charges}`, request: body, at: process.hrtime.bigint().toString() };
  };
  const common = { replayHeaders: [CHARGE_HEADER], ...options };
  // The routes still hanging, each ended by calling it (after the server closed, so nobody gets the answer).
  const hanging: (() => void)[] = [];
  const endHanging = () => {
    for (const end of hanging.splice(0)) end();
  };
  if (framework === 'express') {
    const app = express();
    // Express's own Request for the hook (the default is the structural shape the adapter reads).
    const guard = idempotencyKey<express.Request>({ ...common, scope: (req) => req.get('x-user') });
    const open = idempotencyKey({ ...common, required: false });
    const unscoped = idempotencyKey(common);
    app.use(express.json());
    app.get('/ping', (_req, res) => {
      res.type('text/plain').send('pong');
    });
    app.post('/partial', guard, (req, res, next) => {
      count('partial');
      res.write(INJECTION);
      next(Object.assign(new Error('failed mid-way'), { status: failStatus(req.get('x-fail-status')) }));
    });
    app.post('/slow', guard, async (req, res) => {
      const n = count('slow');
      await sleep(Number(req.get('x-work-ms') ?? 0));
      res.status(201).json({ n });
    });
    app.post('/unscoped', unscoped, (req, res) => {
      res.status(201).json({ n: count('unscoped'), request: req.body });
    });
    app.post('/charges', guard, async (req, res) => {
      const body = charge(req.body);
      await sleep(WORK_MS);
      res.status(201).set(CHARGE_HEADER, body.id).json(body);
    });
    app.post('/flaky', guard, (_req, res) => {
      effects.flaky = (effects.flaky ?? 0) + 1;
      if (effects.flaky === 1) res.status(500).json({ error: 'boom' });
      else res.status(201).json({ ok: effects.flaky });
    });
    app.post('/rejects', guard, (_req, res) => {
      effects.rejects = (effects.rejects ?? 0) + 1;
      res.status(400).json({ error: 'amount must be positive', n: effects.rejects });
    });
    app.post('/hang', guard, (_req, res) => {
      effects.hang = (effects.hang ?? 0) + 1;
      hanging.push(() => res.status(200).end());
    });
    app.post('/bytes', guard, (_req, res) => {
      effects.bytes = (effects.bytes ?? 0) + 1;
      res.status(202).type('application/octet-stream');
      for (const chunk of binaryChunks(effects.bytes)) res.write(chunk);
      res.end();
    });
    app.post('/open', open, (req, res) => {
      effects.open = (effects.open ?? 0) + 1;
      res.status(201).json(req.body);
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    return {
      url: `http://127.0.0.1:${port}`,
      effects,
      close: async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        endHanging();
      },
    };
  }
  // Proto poisoning let through, as express.json() does, so both frameworks hand the adapter the same bodies.
  const app = Fastify({ forceCloseConnections: true, onProtoPoisoning: 'ignore' });
  const guard = fastifyIdempotencyKey({
    ...common,
    scope: (req) => req.headers['x-user'] as string | undefined,
  });
  const open = fastifyIdempotencyKey({ ...common, required: false });
  const unscoped = fastifyIdempotencyKey(common);
  app.get('/ping', async (_req, reply) => {
    reply.type('text/plain');
    return 'pong';
  });
  app.post('/partial', { preHandler: guard }, async (req, reply) => {
    count('partial');
    reply.raw.write(INJECTION);
    throw Object.assign(new Error('failed mid-way'), {
      statusCode: failStatus(req.headers['x-fail-status']),
    });
  });
  app.post('/slow', { preHandler: guard }, async (req, reply) => {
    const n = count('slow');
    await sleep(Number(req.headers['x-work-ms'] ?? 0));
    reply.code(201);
    return { n };
  });
  app.post('/unscoped', { preHandler: unscoped }, async (req, reply) => {
    reply.code(201);
    return { n: count('unscoped'), request: req.body };
  });
  app.post('/charges', { preHandler: guard }, async (req, reply) => {
    const body = charge(req.body);
    await sleep(WORK_MS);
    reply.code(201).header(CHARGE_HEADER, body.id);
    return body;
  });
  app.post('/flaky', { preHandler: guard }, async (_req, reply) => {
    effects.flaky = (effects.flaky ?? 0) + 1;
    if (effects.flaky === 1) throw new Error('boom');
    reply.code(201);
    return { ok: effects.flaky };
  });
  app.post('/rejects', { preHandler: guard }, async (_req, reply) => {
    effects.rejects = (effects.rejects ?? 0) + 1;
    reply.code(400);
    return { error: 'amount must be positive', n: effects.rejects };
  });
  app.post('/hang', { preHandler: guard }, () => {
    effects.hang = (effects.hang ?? 0) + 1;
    return new Promise((resolve) => hanging.push(() => resolve('ended at close')));
  });
  app.post('/bytes', { preHandler: guard }, async (_req, reply) => {
    effects.bytes = (effects.bytes ?? 0) + 1;
    reply.code(202).type('application/octet-stream');
    return Readable.from(binaryChunks(effects.bytes));
  });
  app.post('/open', { preHandler: open }, async (req, reply) => {
    effects.open = (effects.open ?? 0) + 1;
    reply.code(201);
    return req.body;
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    effects,
    close: async () => {
      await app.close();
      endHanging();
    },
  };
}

/**
 * One instance's connection to a shared store, which {@link Severed.sever} cuts as the instance's crash would:
 * from then on every call through it fails as a closed store's does, while other instances go on using the
 * store itself. Closing it cuts it too, and leaves the store open.
 */
export interface Severed {
  readonly repository: IdempotentRepository;
  sever(): void;
}

export function severable(store: IdempotentRepository): Severed {
  let severed = false;
  const repository = new Proxy(store, {
    get(target, name) {
      const value: unknown = Reflect.get(target, name, target);
      if (name === 'close') {
        return async () => {
          severed = true;
        };
      }
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (severed) return Promise.reject(new RepositoryClosedError('a crashed instance’s'));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    repository,
    sever: () => {
      severed = true;
    },
  };
}
