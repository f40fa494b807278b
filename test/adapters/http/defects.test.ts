import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type express from 'express';
import {
  fastifyIdempotencyKey,
  HttpIdempotency,
  idempotencyKey,
  requestFingerprint,
  scopedId,
} from '../../../src/adapters/http/index.js';
import type { HttpIdempotencyOptions } from '../../../src/adapters/http/options.js';
import { ConfigError } from '../../../src/errors.js';
import { LoggedRepository, MemoryChangelog } from '../../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import { RedisRepository } from '../../../src/repositories/redis/index.js';
import { RocksdbRepository } from '../../../src/repositories/rocksdb/index.js';
import type { IdempotentRepository } from '../../../src/store/types.js';
import { endpoints, skipUnlessEnabled } from '../../helpers/stores.js';
import { type Framework, INJECTION, startApp, type TestApp } from './apps.js';

// The adapter tried as a new user and as an attacker would (issue 18), on real servers and real stores.

const rocksRoot = join(tmpdir(), `idem-http-defects-${process.pid}`);
const CORE = fileURLToPath(new URL('../../../src/adapters/http/core.ts', import.meta.url));
const MEMORY = fileURLToPath(new URL('../../../src/repositories/memory/index.ts', import.meta.url));
after(() => rm(rocksRoot, { recursive: true, force: true }));

const stores: Record<string, { skip: false | string; open: () => Promise<IdempotentRepository> }> = {
  memory: { skip: false, open: async () => new MemoryRepository() },
  rocksdb: {
    skip: skipUnlessEnabled('rocksdb'),
    open: () => RocksdbRepository.open({ path: join(rocksRoot, randomUUID()) }),
  },
  redis: {
    skip: skipUnlessEnabled('redis'),
    open: () =>
      RedisRepository.open({ url: endpoints.redisUrl, keyPrefix: `idem-http-defects:${randomUUID()}:` }),
  },
};

interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

async function post(
  url: string,
  options: { key?: string; raw?: string; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  const response = await fetch(url, { method: 'POST', headers, body: options.raw ?? '{"amount":100}' });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

const replayed = (r: Reply) => r.headers.get('idempotent-replayed') === 'true';

/**
 * Sends raw HTTP/1.1 requests one after the other on one keep-alive connection, waiting for the answer (or
 * the close) after each, and returns every byte the server sent.
 */
async function exchange(
  url: string,
  requests: readonly string[],
): Promise<{ bytes: string; closed: boolean }> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  let bytes = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => {
    bytes += chunk.toString('latin1');
  });
  socket.on('error', () => {});
  const whenClosed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  void whenClosed.then(() => {
    closed = true;
  });
  for (const request of requests) {
    if (closed) break;
    socket.write(request);
    await Promise.race([whenClosed, new Promise((resolve) => setTimeout(resolve, 400))]);
  }
  socket.destroy();
  return { bytes, closed };
}

/** Splits a byte stream into responses by their framing; throws when the bytes after a response are not one. */
function framedResponses(bytes: string): { status: number; body: string }[] {
  const responses: { status: number; body: string }[] = [];
  let rest = bytes;
  while (rest.length > 0) {
    assert.match(
      rest,
      /^HTTP\/1\.1 \d{3} /,
      `bytes after the framing of a response: ${JSON.stringify(rest)}`,
    );
    const end = rest.indexOf('\r\n\r\n');
    assert.ok(end > 0, 'a response head was cut');
    const head = rest.slice(0, end);
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? Number.NaN);
    assert.ok(Number.isFinite(length), `a response without Content-Length: ${head}`);
    responses.push({ status: Number(head.slice(9, 12)), body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
  return responses;
}

function rawPost(path: string, key: string, headers: Record<string, string> = {}): string {
  const body = '{"amount":1}';
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  return (
    `POST ${path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\nidempotency-key: "${key}"\r\n` +
    `${extra}content-length: ${body.length}\r\n\r\n${body}`
  );
}

const GET_PING = 'GET /ping HTTP/1.1\r\nhost: test\r\n\r\n';

for (const [storeName, store] of Object.entries(stores)) {
  describe(`HTTP adapter defects on ${storeName}`, { skip: store.skip }, () => {
    for (const framework of ['express', 'fastify'] as const) {
      describe(framework, () => {
        async function setup(
          t: TestContext,
          options: Omit<HttpIdempotencyOptions, 'repository' | 'scope'> = {},
          on: Framework = framework,
        ): Promise<TestApp> {
          const repository = await store.open();
          t.after(async () => {
            await repository.clear().catch(() => undefined);
            await repository.close().catch(() => undefined);
          });
          const app = await startApp(on, { repository, ...options });
          t.after(() => app.close());
          return app;
        }

        it('never replays one principal’s response to another by default (no scope hook)', async (t) => {
          const app = await setup(t);
          const key = `"${randomUUID()}"`;
          const alice = { authorization: 'Bearer alice-token' };
          const first = await post(`${app.url}/unscoped`, { key, headers: alice });
          assert.equal(first.status, 201);
          const bob = await post(`${app.url}/unscoped`, {
            key,
            headers: { authorization: 'Bearer bob-token' },
          });
          assert.equal(bob.status, 201);
          assert.ok(!replayed(bob), 'Bob got Alice’s stored response');
          assert.notEqual(bob.text, first.text);
          const cookie = await post(`${app.url}/unscoped`, { key, headers: { cookie: 'session=carol' } });
          assert.ok(!replayed(cookie));
          const anonymous = await post(`${app.url}/unscoped`, { key });
          assert.ok(!replayed(anonymous), 'an anonymous request got a signed-in user’s response');
          assert.equal(app.effects.unscoped, 4);
          // The same credentials are the same principal: Alice's retry is a replay.
          const retry = await post(`${app.url}/unscoped`, { key, headers: alice });
          assert.ok(replayed(retry));
          assert.equal(retry.text, first.text);
          // Requests without credentials share the anonymous scope.
          assert.ok(replayed(await post(`${app.url}/unscoped`, { key })));
          assert.equal(app.effects.unscoped, 4);
        });

        for (const status of [500, 400]) {
          it(`a route failing with ${status} after it wrote part of its body never desyncs a keep-alive connection, and is not kept`, async (t) => {
            const app = await setup(t);
            const key = randomUUID();
            const headers = { 'x-user': 'alice', 'x-fail-status': String(status) };
            const { bytes } = await exchange(app.url, [rawPost('/partial', key, headers), GET_PING]);
            assert.ok(!bytes.includes('INJECTED'), `the route's partial bytes reached the client: ${bytes}`);
            // Whatever arrived is whole responses by their own framing; a GET answered on it is the real one.
            for (const response of framedResponses(bytes)) {
              if (response.status === 200) assert.equal(response.body, 'pong');
            }
            // The key was given back, never kept with the spliced partial+error body.
            const retry = await exchange(app.url, [rawPost('/partial', key, headers)]);
            assert.ok(!retry.bytes.includes('INJECTED'));
            assert.ok(
              !/idempotent-replayed/i.test(retry.bytes),
              `a spliced body was replayed: ${retry.bytes}`,
            );
            assert.equal(app.effects.partial, 2);
            assert.equal(INJECTION.includes('INJECTED'), true);
          });
        }

        it('answers any key the options allow: a 1000-character key of quotes works', async (t) => {
          const app = await setup(t, { maxKeyLength: 1000 });
          const key = `"${'\\"'.repeat(999)}${randomUUID().slice(0, 1)}"`;
          const first = await post(`${app.url}/charges`, { key, headers: { 'x-user': 'a'.repeat(200) } });
          assert.equal(first.status, 201, first.text);
          const retry = await post(`${app.url}/charges`, { key, headers: { 'x-user': 'a'.repeat(200) } });
          assert.ok(replayed(retry));
          assert.equal(app.effects.charges, 1);
        });

        it('a changed __proto__ member of a JSON body is a 422, not a replay', async (t) => {
          const app = await setup(t);
          const key = `"${randomUUID()}"`;
          const headers = { 'x-user': 'alice' };
          const first = await post(`${app.url}/charges`, {
            key,
            headers,
            raw: '{"__proto__":{"amount":1},"currency":"eur"}',
          });
          assert.equal(first.status, 201, first.text);
          const changed = await post(`${app.url}/charges`, {
            key,
            headers,
            raw: '{"__proto__":{"amount":99999},"currency":"eur"}',
          });
          assert.equal(changed.status, 422, changed.text);
          assert.equal(app.effects.charges, 1);
        });

        it('a route running five times its lease keeps its key: retries meanwhile get 409, one side effect', async (t) => {
          // Renewed every third of the lease: a lease of 600 ms lapsed when a loaded machine stalled the process
          // for 400 ms (a failure seen at load 18); at 1 s such a stall must last over 650 ms.
          const leaseMs = 1_000;
          const app = await setup(t, { leaseMs });
          const key = `"${randomUUID()}"`;
          const headers = { 'x-user': 'alice', 'x-work-ms': String(5 * leaseMs) };
          let firstDone = false;
          const start = Date.now();
          const first = post(`${app.url}/slow`, { key, headers }).finally(() => {
            firstDone = true;
          });
          // Retries for as long as the route runs (not for a fixed time, so a loaded machine cannot make it vacuous).
          // A retry answered before start + 5 leases was handled while the route still slept, so it must be a 409;
          // what counts is a 409 well past the first lease, which only a renewed lease gives.
          let latest409 = 0;
          while (!firstDone) {
            await new Promise((resolve) => setTimeout(resolve, 150));
            const retry = await post(`${app.url}/slow`, { key, headers });
            if (Date.now() - start < 5 * leaseMs) {
              assert.equal(retry.status, 409, `retry after ${Date.now() - start} ms: ${retry.text}`);
              latest409 = Date.now() - start;
            } else {
              assert.ok(retry.status === 409 || replayed(retry), `${retry.status}: ${retry.text}`);
            }
          }
          assert.ok(latest409 > 2 * leaseMs, `the last 409 came ${latest409} ms in, not past two leases`);
          assert.equal((await first).status, 201);
          assert.ok(replayed(await post(`${app.url}/slow`, { key, headers })));
          assert.equal(app.effects.slow, 1);
        });

        it('encrypts stored responses at rest; a response its keys cannot read is never replayed', async (t) => {
          const repository = await store.open();
          t.after(async () => {
            await repository.clear().catch(() => undefined);
            await repository.close().catch(() => undefined);
          });
          const k1 = randomBytes(32);
          const app = await startApp(framework, {
            repository,
            encryption: { keys: { k1 }, currentKeyId: 'k1' },
          });
          t.after(() => app.close());
          const uuid = randomUUID();
          const key = `"${uuid}"`;
          const headers = { 'x-user': 'alice' };
          const first = await post(`${app.url}/charges`, { key, headers, raw: '{"amount":4242}' });
          assert.equal(first.status, 201);
          const replay = await post(`${app.url}/charges`, { key, headers, raw: '{"amount":4242}' });
          assert.ok(replayed(replay));
          assert.equal(replay.text, first.text);
          // Nothing of the response is readable in the store.
          const stored = (await repository.get(scopedId('POST', '/charges', 'alice', uuid)))?.result ?? '';
          assert.match(stored, /^xk1\./);
          assert.ok(!stored.includes('4242') && !stored.includes('ch_'), stored);
          // Another instance with only a new key: 500 problem, the route does not run again.
          const rotated = await startApp(framework, {
            repository,
            encryption: { keys: { k2: randomBytes(32) }, currentKeyId: 'k2' },
          });
          t.after(() => rotated.close());
          const refused = await post(`${rotated.url}/charges`, { key, headers, raw: '{"amount":4242}' });
          assert.equal(refused.status, 500, refused.text);
          assert.match(refused.text, /http:response-unreadable/);
          assert.equal(rotated.effects.charges, 0);
          assert.equal(app.effects.charges, 1);
        });

        it('a dotted encryption key id (2026.12) replays the stored response, not a 500', async (t) => {
          const repository = await store.open();
          t.after(async () => {
            await repository.clear().catch(() => undefined);
            await repository.close().catch(() => undefined);
          });
          const app = await startApp(framework, {
            repository,
            encryption: { keys: { '2026.12': randomBytes(32) }, currentKeyId: '2026.12' },
          });
          t.after(() => app.close());
          const key = `"${randomUUID()}"`;
          const headers = { 'x-user': 'alice' };
          const first = await post(`${app.url}/charges`, { key, headers, raw: '{"amount":4242}' });
          assert.equal(first.status, 201);
          const replay = await post(`${app.url}/charges`, { key, headers, raw: '{"amount":4242}' });
          assert.equal(replay.status, 201, replay.text);
          assert.ok(replayed(replay));
          assert.equal(replay.text, first.text);
          assert.equal(app.effects.charges, 1);
        });

        it('storeIf chooses what is kept: only 2xx', async (t) => {
          const app = await setup(t, { storeIf: (response) => response.status < 300 });
          const key = `"${randomUUID()}"`;
          const headers = { 'x-user': 'alice' };
          assert.equal((await post(`${app.url}/rejects`, { key, headers })).status, 400);
          const again = await post(`${app.url}/rejects`, { key, headers });
          assert.equal(again.status, 400);
          assert.ok(!replayed(again));
          assert.equal(app.effects.rejects, 2);
          const charge = `"${randomUUID()}"`;
          await post(`${app.url}/charges`, { key: charge, headers });
          assert.ok(replayed(await post(`${app.url}/charges`, { key: charge, headers })));
        });
      });
    }
  });
}

describe('HTTP adapter options', () => {
  it('fingerprints a __proto__ body member as a member', () => {
    const parts = (body: string) => ({ method: 'POST', target: '/c', body: JSON.parse(body) });
    assert.notEqual(
      requestFingerprint(parts('{"__proto__":{"a":1}}')),
      requestFingerprint(parts('{"__proto__":{"a":2}}')),
    );
  });

  it('refuses a ttlMs, leaseMs or retryAfterMs outside the TTL rule when it is built, on both frameworks', () => {
    const factories = {
      express: (options: HttpIdempotencyOptions) => idempotencyKey(options),
      fastify: (options: HttpIdempotencyOptions) => fastifyIdempotencyKey(options),
    } as const;
    for (const [framework, factory] of Object.entries(factories)) {
      for (const option of ['ttlMs', 'leaseMs', 'retryAfterMs'] as const) {
        for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, 0, -5, 1e30]) {
          assert.throws(
            () => factory({ repository: new MemoryRepository(), [option]: bad }),
            (error: unknown) =>
              error instanceof ConfigError && new RegExp(`option ${option} of `).test(error.message),
            `${framework} accepted ${option} ${bad}`,
          );
        }
      }
    }
    // The store's own maximum too: a store that keeps records for a minute refuses the default day.
    const inner = new MemoryRepository();
    const store = new LoggedRepository(inner, new MemoryChangelog(), {
      capabilities: { ...inner.capabilities, maxTtlMs: 60_000 },
    });
    assert.throws(
      () => new HttpIdempotency({ repository: store }),
      (error: unknown) =>
        error instanceof ConfigError && /option ttlMs of .*at most 60000 ms/.test(error.message),
    );
  });

  it('refuses releaseOn together with storeIf, naming the option', () => {
    assert.throws(
      () =>
        new HttpIdempotency<express.Request>({
          repository: new MemoryRepository(),
          storeIf: () => true,
          releaseOn: () => false,
        }),
      /option releaseOn of idempotencyKey\(\.\.\.\): cannot be given with storeIf/,
    );
  });

  /** The IDEM_HTTP_CREDENTIAL_SCOPE warnings of a fresh process that builds an adapter per `scopes` entry. */
  function scopeWarnings(scopes: readonly string[]): string[] {
    const script = `
      const { HttpIdempotency } = await import(${JSON.stringify(CORE)});
      const { MemoryRepository } = await import(${JSON.stringify(MEMORY)});
      const seen = [];
      process.on('warning', (w) => { if (w.code === 'IDEM_HTTP_CREDENTIAL_SCOPE') seen.push(w.message); });
      const scopes = { none: undefined, credentials: 'credentials', hook: (req) => req.user };
      for (const name of ${JSON.stringify(scopes)}) new HttpIdempotency({ repository: new MemoryRepository(), scope: scopes[name] });
      setImmediate(() => console.log(JSON.stringify(seen)));`;
    const result = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '--no-warnings', '-e', script],
      { encoding: 'utf8' },
    );
    assert.equal(result.status, 0, result.stderr);
    return JSON.parse(result.stdout) as string[];
  }

  it('warns once per process when no scope is chosen; a hook or scope: credentials is a choice', () => {
    const warned = scopeWarnings(['none', 'hook', 'none']);
    assert.equal(warned.length, 1);
    assert.match(warned[0] ?? '', /access-token refresh or a cookie change runs the route again/);
    assert.match(warned[0] ?? '', /scope: 'credentials'/);
    assert.deepEqual(scopeWarnings(['credentials', 'hook', 'credentials']), []);
  });

  it("scope: 'credentials' scopes by the credentials' digest, as the default does; a bad scope is refused", async () => {
    const repository = new MemoryRepository();
    const explicit = new HttpIdempotency({ repository, scope: 'credentials' }).options.principal;
    const view = (authorization: string) => ({
      request: {},
      method: 'POST',
      route: '/c',
      target: '/c',
      body: undefined,
      hasBody: false,
      header: (name: string) => (name === 'authorization' ? authorization : undefined),
    });
    const alice = await explicit(view('Bearer alice'));
    assert.match(String(alice), /^credentials:/);
    assert.equal(await explicit(view('Bearer alice')), alice);
    assert.notEqual(await explicit(view('Bearer bob')), alice);
    assert.throws(
      () => new HttpIdempotency({ repository, scope: 'user' as never }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /option scope of idempotencyKey\(\.\.\.\): must be a function/.test(error.message),
    );
  });

  it('warns once when the memory store backs the adapter under NODE_ENV=production', (t) => {
    const previous = process.env.NODE_ENV;
    t.after(() => {
      process.env.NODE_ENV = previous;
    });
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    t.after(() => process.off('warning', onWarning));
    process.env.NODE_ENV = 'production';
    new HttpIdempotency({ repository: new MemoryRepository() });
    new HttpIdempotency({ repository: new MemoryRepository() });
    return new Promise<void>((resolve) =>
      setImmediate(() => {
        const ours = warnings.filter(
          (w) => (w as { code?: string }).code === 'IDEM_HTTP_PROCESS_LOCAL_STORE',
        );
        assert.equal(ours.length, 1);
        assert.match(ours[0]?.message ?? '', /holds keys in this process only/);
        resolve();
      }),
    );
  });
});
