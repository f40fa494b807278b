import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import type { HttpIdempotencyOptions } from '../../../src/adapters/http/options.js';
import { ClaimLostError } from '../../../src/errors.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import { RedisRepository } from '../../../src/repositories/redis/index.js';
import { BaseRepository } from '../../../src/store/base.js';
import type { IdempotentRepository } from '../../../src/store/types.js';
import { endpoints, skipUnlessEnabled } from '../../helpers/stores.js';
import { startApp, type TestApp } from './apps.js';

// Who holds a key while its route runs: the route's work, not the client's connection (real servers, real
// clients, the memory store and Redis as a store shared by instances).

const stores: Record<string, { skip: false | string; open: () => Promise<IdempotentRepository> }> = {
  memory: { skip: false, open: async () => new MemoryRepository() },
  redis: {
    skip: skipUnlessEnabled('redis'),
    open: () =>
      RedisRepository.open({ url: endpoints.redisUrl, keyPrefix: `idem-http-lease:${randomUUID()}:` }),
  },
};

/** A store written before `renew` existed (no doRenew of its own): its claims hold for one lease only. */
class StoreWithoutRenew extends MemoryRepository {
  protected override doRenew(key: string, owner: string, leaseMs: number, now: number): Promise<boolean> {
    const base = BaseRepository.prototype as unknown as { doRenew: StoreWithoutRenew['doRenew'] };
    return base.doRenew.call(this, key, owner, leaseMs, now);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `condition` holds, checking every few ms; fails after `timeoutMs`. */
async function until(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Sleeps until the epoch ms `at` (a lease is a span of time: only the clock can say it has passed). */
const sleepUntil = (at: number) => sleep(Math.max(0, at - Date.now()));

interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
}

const HEADERS = { 'content-type': 'application/json', 'x-user': 'alice' };

async function post(url: string, key: string, headers: Record<string, string> = {}): Promise<Reply> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { ...HEADERS, 'idempotency-key': key, ...headers },
    body: '{"amount":100}',
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/**
 * A client that gives up: node's own HTTP client with a timeout signal, which destroys its socket when the
 * signal fires, as a client library's request timeout does. Resolves with the abort's error name.
 */
function postGivingUpAfter(url: string, key: string, timeoutMs: number, headers: Record<string, string>) {
  const body = '{"amount":100}';
  return new Promise<string>((resolve, reject) => {
    const req = httpRequest(url, {
      method: 'POST',
      headers: { ...HEADERS, 'idempotency-key': key, 'content-length': body.length, ...headers },
      signal: AbortSignal.timeout(timeoutMs),
    });
    req.on('response', (res) => reject(new Error(`the route answered ${res.statusCode} before the timeout`)));
    req.on('error', (error) => resolve(error.name));
    req.end(body);
  });
}

const replayed = (r: Reply) => r.headers.get('idempotent-replayed') === 'true';

/** Collects what the adapter tells `onError`. */
function errorsTold(): { errors: unknown[]; onError: (error: unknown) => void } {
  const errors: unknown[] = [];
  return { errors, onError: (error) => errors.push(error) };
}

for (const [storeName, store] of Object.entries(stores)) {
  describe(`HTTP adapter leases on ${storeName}`, { skip: store.skip }, () => {
    for (const framework of ['express', 'fastify'] as const) {
      describe(framework, () => {
        async function setup(
          t: TestContext,
          options: Omit<HttpIdempotencyOptions, 'repository' | 'scope'> = {},
        ): Promise<TestApp> {
          const repository = await store.open();
          t.after(async () => {
            await repository.clear().catch(() => undefined);
            await repository.close().catch(() => undefined);
          });
          const app = await startApp(framework, { repository, ...options });
          t.after(() => app.close());
          return app;
        }

        it('a client that times out does not free the key of a route still running: its retry gets 409, one side effect', async (t) => {
          // A 2 s lease (renewed every 667 ms) and a route of four leases: a loaded machine that runs a timer
          // late by a second must neither lapse a renewed claim nor end the route before the retry is sent.
          const leaseMs = 2_000;
          const told = errorsTold();
          const app = await setup(t, { leaseMs, onError: told.onError });
          const key = `"${randomUUID()}"`;
          const headers = { 'x-work-ms': String(4 * leaseMs) };
          const first = postGivingUpAfter(`${app.url}/slow`, key, leaseMs / 2, headers);
          await until(() => app.effects.slow === 1, 'the route to start');
          const started = Date.now();
          assert.equal(await first, 'AbortError');
          // Twice the lease after the route started: a claim left unrenewed since the client left has lapsed.
          await sleepUntil(started + 2 * leaseMs);
          const retry = await post(`${app.url}/slow`, key, headers);
          assert.equal(retry.status, 409, `the retry ran the route again: ${retry.status} ${retry.text}`);
          assert.match(retry.text, /http:in-progress/);
          assert.equal(app.effects.slow, 1);
          // Once the route has answered (to nobody), its response is kept: the next retry is its replay.
          let last = retry;
          const deadline = Date.now() + 6 * leaseMs;
          while (last.status === 409 && Date.now() < deadline) {
            await sleep(100);
            last = await post(`${app.url}/slow`, key, headers);
          }
          assert.equal(last.status, 201, last.text);
          assert.ok(replayed(last));
          assert.deepEqual(JSON.parse(last.text), { n: 1 });
          assert.equal(app.effects.slow, 1);
          assert.deepEqual(told.errors, []);
        });

        it('a 409 says to retry after the retryAfterMs hint (1 s by default), never after the remaining lease', async (t) => {
          /** The Retry-After of a retry sent while a 1.5 s route runs, on an app with these options. */
          const retryAfter = async (options: Omit<HttpIdempotencyOptions, 'repository' | 'scope'>) => {
            const app = await setup(t, options);
            const key = `"${randomUUID()}"`;
            const headers = { 'x-work-ms': '1500' };
            const first = post(`${app.url}/slow`, key, headers);
            await until(() => app.effects.slow === 1, 'the route to start');
            const retry = await post(`${app.url}/slow`, key, headers);
            assert.equal(retry.status, 409, retry.text);
            assert.equal((await first).status, 201);
            return retry.headers.get('retry-after');
          };
          // Settled, not raced: every app is set up (and closed after the test) whichever case fails.
          const [byDefault, hinted, pastTheLease] = (
            await Promise.allSettled([
              // The default lease is 60 s: the remaining lease would say 60 for a route that takes 1.5 s.
              retryAfter({}),
              retryAfter({ retryAfterMs: 2_500 }),
              retryAfter({ leaseMs: 2_000, retryAfterMs: 600_000 }),
            ])
          ).map((settled) => (settled.status === 'fulfilled' ? settled.value : String(settled.reason)));
          assert.equal(byDefault, '1');
          assert.equal(hinted, '3');
          // A hint longer than the lease is cut to the claim's remaining lease (at most 2 s, whole seconds).
          assert.ok(['1', '2'].includes(String(pastTheLease)), `Retry-After ${pastTheLease}`);
        });
      });
    }
  });
}

describe('HTTP adapter lost claims', () => {
  for (const framework of ['express', 'fastify'] as const) {
    it(`${framework}: a claim lost to a retry is logged by default (a process warning), and told to onError`, async (t) => {
      const leaseMs = 600;
      const warnings: Error[] = [];
      const onWarning = (warning: Error) => {
        if (warning.name === 'IdempotencyKeyWarning') warnings.push(warning);
      };
      process.on('warning', onWarning);
      t.after(() => process.off('warning', onWarning));
      // A store that cannot renew: a route slower than the lease loses its claim to the retry sent after it.
      const repository = new StoreWithoutRenew();
      const told = errorsTold();
      const logged = await startApp(framework, { repository, leaseMs });
      t.after(() => logged.close());
      const reported = await startApp(framework, { repository, leaseMs, onError: told.onError });
      t.after(() => reported.close());
      for (const app of [logged, reported]) {
        const key = `"${randomUUID()}"`;
        const headers = { 'x-work-ms': String(3 * leaseMs) };
        const first = post(`${app.url}/slow`, key, headers);
        await until(() => app.effects.slow === 1, 'the route to start');
        await sleep(leaseMs + 100);
        const retry = await post(`${app.url}/slow`, key, headers);
        assert.equal(retry.status, 201, retry.text);
        assert.equal((await first).status, 201);
      }
      await until(() => warnings.length > 0, 'the default warning');
      assert.equal(warnings.length, 1);
      assert.match(String(warnings[0]?.message), /claim on message .* was lost/);
      await until(() => told.errors.length > 0, 'onError');
      assert.equal(told.errors.length, 1);
      assert.ok(told.errors[0] instanceof ClaimLostError, String(told.errors[0]));
    });
  }
});
