import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { createExampleApp, openExampleStore } from '../../../examples/http/server.js';
import { endpoints, skipUnlessEnabled } from '../../helpers/stores.js';

// The example server of docs/http.md, on the store its config names.

async function serve(t: TestContext, env: Record<string, string>, payoutMs?: number) {
  const store = await openExampleStore(env);
  t.after(async () => {
    await store.repository.clear();
    await store.repository.close();
  });
  const { app } = createExampleApp(
    { repository: store.repository, ttlMs: store.ttlMs, leaseMs: store.leaseMs },
    payoutMs === undefined ? {} : { payoutMs },
  );
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return { store, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function charge(url: string, key: string, amount: number, token = 'alice-token', path = '/charges') {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'idempotency-key': `"${key}"`,
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify({ amount, currency: 'eur' }),
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    retryAfter: response.headers.get('retry-after'),
    text: await response.text(),
  };
}

async function sideEffects(url: string): Promise<number> {
  return ((await (await fetch(`${url}/side-effects`)).json()) as { count: number }).count;
}

describe('examples/http/server.ts', () => {
  it('uses the memory store without IDEM_CONFIG, and counts one side effect per key', async (t) => {
    const { store, url } = await serve(t, {});
    assert.equal(store.type, 'memory');
    assert.equal(store.ttlMs, 24 * 3_600_000);
    const key = randomUUID();
    const first = await charge(url, key, 1999);
    assert.equal(first.status, 201);
    const retry = await charge(url, key, 1999);
    assert.deepEqual(retry, { ...first, replayed: 'true' });
    assert.equal((await charge(url, key, 2500)).status, 422);
    assert.equal(await sideEffects(url), 1);
  });

  it('scopes keys to the signed-in user: Bob never gets Alice’s response', async (t) => {
    const { url } = await serve(t, {});
    const key = randomUUID();
    const alice = await charge(url, key, 1999, 'alice-token');
    const bob = await charge(url, key, 1999, 'bob-token');
    assert.equal(bob.status, 201);
    assert.equal(bob.replayed, null);
    assert.notEqual(bob.text, alice.text);
    assert.equal((await charge(url, key, 1999, 'nobody')).status, 401);
    assert.equal(await sideEffects(url), 2);
  });

  it('answers a retry sent while the slow payout runs with the documented 409', async (t) => {
    const { url } = await serve(t, {}, 1_500);
    const key = randomUUID();
    const first = charge(url, key, 10, 'alice-token', '/payouts');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const retry = await charge(url, key, 10, 'alice-token', '/payouts');
    assert.equal(retry.status, 409);
    assert.match(retry.text, /http:in-progress/);
    assert.ok(Number(retry.retryAfter) >= 1);
    assert.equal((await first).status, 201);
    assert.equal((await charge(url, key, 10, 'alice-token', '/payouts')).replayed, 'true');
    assert.equal(await sideEffects(url), 1);
  });

  it('takes the store and its timings from the file IDEM_CONFIG names', {
    skip: skipUnlessEnabled('redis'),
  }, async (t) => {
    const { store, url } = await serve(t, {
      IDEM_CONFIG: 'examples/http/redis.toml',
      IDEM__REPOSITORY__URL: endpoints.redisUrl,
      IDEM__REPOSITORY__KEYPREFIX: `idem-http-example-test:${randomUUID()}:`,
    });
    assert.equal(store.type, 'redis');
    assert.equal(store.leaseMs, 30_000);
    const key = randomUUID();
    assert.equal((await charge(url, key, 1)).status, 201);
    assert.equal((await charge(url, key, 1)).replayed, 'true');
    assert.equal(await sideEffects(url), 1);
  });
});
