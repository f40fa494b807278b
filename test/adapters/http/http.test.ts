import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import express from 'express';
import { idempotencyKey } from '../../../src/adapters/http/index.js';
import type { HttpIdempotencyOptions } from '../../../src/adapters/http/options.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import { RedisRepository } from '../../../src/repositories/redis/index.js';
import { RocksdbRepository } from '../../../src/repositories/rocksdb/index.js';
import type { IdempotentRepository } from '../../../src/store/types.js';
import { endpoints, skipUnlessEnabled } from '../../helpers/stores.js';
import { binaryChunks, CHARGE_HEADER, type Framework, severable, startApp, type TestApp } from './apps.js';

// Real servers (Express and Fastify on an ephemeral port), a real client (fetch), real stores.

const rocksRoot = join(tmpdir(), `idem-http-rocksdb-${process.pid}`);
after(() => rm(rocksRoot, { recursive: true, force: true }));

/** Each test gets its own namespace, so runs and tests never share a key. */
const stores: Record<string, { skip: false | string; open: () => Promise<IdempotentRepository> }> = {
  memory: { skip: false, open: async () => new MemoryRepository() },
  rocksdb: {
    skip: skipUnlessEnabled('rocksdb'),
    open: () => RocksdbRepository.open({ path: join(rocksRoot, randomUUID()) }),
  },
  redis: {
    skip: skipUnlessEnabled('redis'),
    open: () =>
      RedisRepository.open({ url: endpoints.redisUrl, keyPrefix: `idem-http-test:${randomUUID()}:` }),
  },
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly bytes: Buffer;
  readonly json: () => Record<string, unknown>;
}

async function post(
  url: string,
  options: { key?: string; body?: unknown; headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  const response = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify(options.body ?? { amount: 100 }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const bytes = Buffer.from(await response.arrayBuffer());
  return {
    status: response.status,
    headers: response.headers,
    bytes,
    json: () => JSON.parse(bytes.toString()),
  };
}

const replayed = (r: Reply) => r.headers.get('idempotent-replayed') === 'true';

function assertProblem(r: Reply, status: number, kind: string, detail: RegExp): void {
  assert.equal(r.status, status, r.bytes.toString());
  assert.equal(r.headers.get('content-type'), 'application/problem+json');
  const body = r.json();
  assert.equal(body.type, `tag:idempotent-consumer,2026:http:${kind}`);
  assert.equal(body.status, status);
  assert.equal(typeof body.title, 'string');
  assert.match(String(body.detail), detail);
}

for (const [storeName, store] of Object.entries(stores)) {
  describe(`HTTP Idempotency-Key on ${storeName}`, { skip: store.skip }, () => {
    for (const framework of ['express', 'fastify'] as const) {
      describe(framework, () => {
        /** A repository and an app over it, both closed after the test. */
        async function setup(
          t: TestContext,
          options: Omit<HttpIdempotencyOptions, 'repository' | 'scope'> = {},
          on: Framework = framework,
        ): Promise<{ app: TestApp; repository: IdempotentRepository }> {
          const repository = await store.open();
          t.after(async () => {
            await repository.clear().catch(() => undefined);
            await repository.close().catch(() => undefined);
          });
          const app = await startApp(on, { repository, ...options });
          t.after(() => app.close());
          return { app, repository };
        }

        it('50 concurrent requests with one key make one side effect, one success, 409s or replays', async (t) => {
          const { app } = await setup(t);
          const key = `"${randomUUID()}"`;
          const replies = await Promise.all(
            Array.from({ length: 50 }, () => post(`${app.url}/charges`, { key, body: { amount: 100 } })),
          );
          assert.equal(app.effects.charges, 1);
          const firsts = replies.filter((r) => r.status === 201 && !replayed(r));
          const replays = replies.filter((r) => r.status === 201 && replayed(r));
          const conflicts = replies.filter((r) => r.status === 409);
          assert.equal(firsts.length, 1);
          assert.equal(firsts.length + replays.length + conflicts.length, 50);
          for (const r of conflicts) {
            assertProblem(r, 409, 'in-progress', /still being processed/);
            assert.ok(Number(r.headers.get('retry-after')) >= 1);
          }
          for (const r of replays) assert.ok(r.bytes.equals((firsts[0] as Reply).bytes));
          // Once the first has answered, its key replays.
          const again = await post(`${app.url}/charges`, { key, body: { amount: 100 } });
          assert.equal(again.status, 201);
          assert.ok(replayed(again));
          assert.equal(app.effects.charges, 1);
        });

        it('replays the stored response byte for byte: status, body bytes and chosen headers', async (t) => {
          const { app } = await setup(t);
          const key = randomUUID();
          const first = await post(`${app.url}/charges`, { key, body: { amount: 5, note: 'café ☕' } });
          assert.equal(first.status, 201);
          assert.equal(replayed(first), false);
          // Same request, keys of the JSON body in another order: the same fingerprint.
          const retry = await post(`${app.url}/charges`, { key, body: { note: 'café ☕', amount: 5 } });
          assert.equal(retry.status, 201);
          assert.ok(replayed(retry));
          assert.ok(retry.bytes.equals(first.bytes), 'body bytes differ');
          for (const name of ['content-type', CHARGE_HEADER]) {
            assert.ok(first.headers.get(name), name);
            assert.equal(retry.headers.get(name), first.headers.get(name), name);
          }
          assert.equal(retry.headers.get('content-length'), String(first.bytes.length));
          assert.equal(app.effects.charges, 1);
        });

        it('replays a binary response written in chunks byte for byte', async (t) => {
          const { app } = await setup(t);
          const key = randomUUID();
          const first = await post(`${app.url}/bytes`, { key });
          assert.equal(first.status, 202);
          assert.ok(first.bytes.equals(Buffer.concat(binaryChunks(1))));
          const retry = await post(`${app.url}/bytes`, { key });
          assert.equal(retry.status, 202);
          assert.ok(replayed(retry));
          assert.ok(retry.bytes.equals(first.bytes));
          assert.equal(retry.headers.get('content-type'), 'application/octet-stream');
          assert.equal(app.effects.bytes, 1);
        });

        it('sends a response too large to keep once, then answers 409 response-not-kept', async (t) => {
          const { app } = await setup(t, { maxResponseBytes: 64 });
          const key = randomUUID();
          const first = await post(`${app.url}/charges`, { key });
          assert.equal(first.status, 201);
          assertProblem(await post(`${app.url}/charges`, { key }), 409, 'response-not-kept', /not kept/);
          assert.equal(app.effects.charges, 1);
        });

        it('answers 422 when the key comes back with another body, without running the route', async (t) => {
          const { app } = await setup(t);
          const key = randomUUID();
          assert.equal((await post(`${app.url}/charges`, { key, body: { amount: 5 } })).status, 201);
          const changed = await post(`${app.url}/charges`, { key, body: { amount: 6 } });
          assertProblem(changed, 422, 'key-reused', /different request/);
          assert.equal(app.effects.charges, 1);
        });

        it('answers 400 for a missing or invalid key, and lets a keyless request through where optional', async (t) => {
          const { app } = await setup(t, { maxKeyLength: 40 });
          assertProblem(await post(`${app.url}/charges`), 400, 'key-missing', /requires an Idempotency-Key/);
          assertProblem(
            await post(`${app.url}/charges`, { key: 'k'.repeat(41) }),
            400,
            'key-invalid',
            /41 characters long; at most 40/,
          );
          assertProblem(
            await post(`${app.url}/charges`, { key: '"unterminated' }),
            400,
            'key-invalid',
            /quoted/,
          );
          assert.equal(app.effects.charges, 0);
          assert.equal((await post(`${app.url}/open`)).status, 201);
          assert.equal((await post(`${app.url}/open`)).status, 201);
          assert.equal(app.effects.open, 2);
        });

        it('releases the key after a 5xx so a retry runs the route again', async (t) => {
          const { app } = await setup(t);
          const key = randomUUID();
          const failed = await post(`${app.url}/flaky`, { key });
          assert.equal(failed.status, 500);
          const retry = await post(`${app.url}/flaky`, { key });
          assert.equal(retry.status, 201);
          assert.equal(replayed(retry), false);
          assert.equal(app.effects.flaky, 2);
          // The success is kept.
          const third = await post(`${app.url}/flaky`, { key });
          assert.ok(replayed(third));
          assert.equal(app.effects.flaky, 2);
        });

        it('keeps a 4xx by default, and releases it when releaseOn says so', async (t) => {
          const kept = (await setup(t)).app;
          const key = randomUUID();
          const first = await post(`${kept.url}/rejects`, { key });
          assert.equal(first.status, 400);
          const retry = await post(`${kept.url}/rejects`, { key });
          assert.equal(retry.status, 400);
          assert.ok(replayed(retry));
          assert.ok(retry.bytes.equals(first.bytes));
          assert.equal(kept.effects.rejects, 1);

          const released = (await setup(t, { releaseOn: (status) => status >= 400 })).app;
          await post(`${released.url}/rejects`, { key });
          const rerun = await post(`${released.url}/rejects`, { key });
          assert.equal(replayed(rerun), false);
          assert.equal(released.effects.rejects, 2);
        });

        it('answers 503 when the store fails before the route, and does not run it', async (t) => {
          const { app, repository } = await setup(t);
          await repository.close();
          const r = await post(`${app.url}/charges`, { key: randomUUID() });
          assertProblem(r, 503, 'store-unavailable', /did not answer/);
          assert.equal(app.effects.charges, 0);
        });

        it('scopes keys per route and per principal', async (t) => {
          const { app } = await setup(t);
          const key = randomUUID();
          assert.equal(
            replayed(await post(`${app.url}/charges`, { key, headers: { 'x-user': 'alice' } })),
            false,
          );
          assert.equal(
            replayed(await post(`${app.url}/charges`, { key, headers: { 'x-user': 'bob' } })),
            false,
          );
          assert.equal(
            replayed(await post(`${app.url}/charges`, { key, headers: { 'x-user': 'alice' } })),
            true,
          );
          assert.equal(app.effects.charges, 2);
          // The same key on another route is another key.
          assert.equal((await post(`${app.url}/rejects`, { key })).status, 400);
          assert.equal(app.effects.rejects, 1);
        });
      });
    }

    it('frees the key of a crashed request at the lease end (a second instance takes it over)', async (t) => {
      const repository = await store.open();
      t.after(async () => {
        await repository.clear().catch(() => undefined);
        await repository.close();
      });
      const leaseMs = 600;
      // Two instances over one store, as two processes would be: the first one's request never answers, then
      // its process dies (its connection to the store is cut, so nothing renews the claim any more). Its client
      // leaving is not what frees the key: a route still running keeps renewing it.
      const link = severable(repository);
      const crashed = await startApp('express', { repository: link.repository, leaseMs });
      const survivor = await startApp('fastify', { repository, leaseMs });
      t.after(() => survivor.close());
      const key = randomUUID();
      const abort = new AbortController();
      const hung = post(`${crashed.url}/hang`, { key, signal: abort.signal }).catch(() => 'aborted');
      while (crashed.effects.hang === 0) await sleep(10);
      abort.abort();
      assert.equal(await hung, 'aborted');
      link.sever();
      await crashed.close();

      assertProblem(await post(`${survivor.url}/hang`, { key }), 409, 'in-progress', /still being processed/);
      await sleep(leaseMs + 200);
      const taken = post(`${survivor.url}/hang`, { key, signal: AbortSignal.timeout(300) }).catch(
        () => 'ran',
      );
      assert.equal(await taken, 'ran');
      assert.equal(survivor.effects.hang, 1);
    });
  });
}

describe('HTTP Idempotency-Key on Express without a body parser', () => {
  it('refuses a request with a body with 500 body-not-parsed instead of fingerprinting without it', async (t) => {
    const repository = new MemoryRepository();
    const app = express();
    let runs = 0;
    app.post('/charges', idempotencyKey({ repository }), (_req, res) => {
      runs++;
      res.status(201).end();
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`;
    assertProblem(await post(url, { key: randomUUID() }), 500, 'body-not-parsed', /express\.json\(\)/);
    assert.equal(runs, 0);
  });
});

describe('HTTP Idempotency-Key on Express behind middleware that wraps the response', () => {
  // `on-headers` (express-session, response-time) wraps `res.writeHead` to set headers just before they go
  // out; `compression` wraps `res.write`/`res.end`. Both are mounted before the routes, so before the adapter.
  it("keeps an earlier middleware's writeHead and end wrappers on the response that is sent", async (t) => {
    const repository = new MemoryRepository();
    const app = express();
    let ended = 0;
    app.use((_req, res, next) => {
      const writeHead = res.writeHead;
      res.writeHead = function (this: typeof res, ...args: unknown[]) {
        this.setHeader('x-session', 'set-at-write-head');
        return (writeHead as (...a: unknown[]) => typeof res).apply(this, args);
      } as typeof res.writeHead;
      const end = res.end;
      res.end = function (this: typeof res, ...args: unknown[]) {
        ended++;
        return (end as (...a: unknown[]) => typeof res).apply(this, args);
      } as typeof res.end;
      next();
    });
    let runs = 0;
    app.post('/charges', express.json(), idempotencyKey({ repository }), (_req, res) => {
      runs++;
      res.status(201).json({ run: runs });
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`;
    const key = randomUUID();

    const first = await post(url, { key });
    assert.equal(first.status, 201);
    assert.deepEqual(first.json(), { run: 1 });
    assert.equal(first.headers.get('x-session'), 'set-at-write-head', 'the earlier writeHead wrapper ran');
    assert.equal(ended, 1, 'the earlier end wrapper sent the response');

    const again = await post(url, { key });
    assert.equal(again.status, 201);
    assert.ok(replayed(again));
    assert.deepEqual(again.json(), { run: 1 });
    assert.equal(again.headers.get('x-session'), 'set-at-write-head', 'a replay goes through it too');
    assert.equal(runs, 1);
  });
});

describe('HTTP Idempotency-Key on a route that calls res.writeHeader', () => {
  // Node's `writeHeader` is its own alias of `writeHead` (the same function, not a call through `writeHead`):
  // a capture that replaced only `writeHead` let it set the status and headers past the capture.
  it('holds back and keeps what writeHeader sets, as it does for writeHead', async (t) => {
    const repository = new MemoryRepository();
    const app = express();
    // No header set before writeHeader (Express's X-Powered-By would be one): Node's writeHead then writes the
    // headers it is given straight into the header block, where a capture that missed it cannot read them.
    app.disable('x-powered-by');
    let runs = 0;
    let refused = '';
    const guard = idempotencyKey({ repository, replayHeaders: ['x-run'] });
    app.post('/charges', express.json(), guard, (_req, res) => {
      runs++;
      const writeHeader = (res as unknown as { writeHeader: typeof res.writeHead }).writeHeader;
      writeHeader.call(res, 202, { 'content-type': 'text/plain; charset=utf-8', 'x-run': String(runs) });
      try {
        res.setHeader('x-late', 'no');
      } catch (error) {
        refused = (error as { code?: string }).code ?? 'thrown';
      }
      res.write('accepted ');
      res.end(`run ${runs}`);
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/charges`;
    const key = randomUUID();

    const first = await post(url, { key });
    assert.equal(first.status, 202);
    assert.equal(first.bytes.toString(), 'accepted run 1');
    assert.equal(first.headers.get('x-run'), '1');
    assert.equal(refused, 'ERR_HTTP_HEADERS_SENT', 'headers are committed once writeHeader ran');

    const again = await post(url, { key });
    assert.ok(replayed(again));
    assert.equal(again.status, 202);
    assert.equal(again.bytes.toString(), 'accepted run 1');
    assert.equal(again.headers.get('content-type'), 'text/plain; charset=utf-8');
    assert.equal(again.headers.get('x-run'), '1');
    assert.equal(runs, 1);
  });
});

describe('HTTP Idempotency-Key across Express sub-apps', () => {
  // Express sets a response's prototype to the app's `response` on the way into a mounted sub-app (inheriting
  // from its parent's), and back on the way out. A capture must hold across both swaps.
  async function serve(t: TestContext, app: express.Express): Promise<string> {
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => new Promise((resolve) => server.close(resolve)));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async function assertOneRunReplayed(url: string, runs: () => number): Promise<void> {
    const key = randomUUID();
    const first = await post(url, { key });
    assert.equal(first.status, 201);
    assert.deepEqual(first.json(), { run: 1 });
    const again = await post(url, { key });
    assert.equal(again.status, 201);
    assert.ok(replayed(again), 'the retry is a replay');
    assert.deepEqual(again.json(), { run: 1 });
    assert.equal(runs(), 1);
  }

  it('captures a response the route writes inside a sub-app mounted after the adapter', async (t) => {
    const app = express();
    const billing = express();
    let runs = 0;
    billing.post('/charges', (_req, res) => {
      runs++;
      res.status(201).json({ run: runs });
    });
    app.use(express.json(), idempotencyKey({ repository: new MemoryRepository() }));
    app.use('/billing', billing);
    await assertOneRunReplayed(`${await serve(t, app)}/billing/charges`, () => runs);
  });

  it('captures a response written in the parent app after a sub-app with the adapter fell through', async (t) => {
    const app = express();
    const guarded = express();
    guarded.use(express.json(), idempotencyKey({ repository: new MemoryRepository() }));
    let runs = 0;
    app.use(guarded);
    app.post('/charges', (_req, res) => {
      runs++;
      res.status(201).json({ run: runs });
    });
    await assertOneRunReplayed(`${await serve(t, app)}/charges`, () => runs);
  });
});
