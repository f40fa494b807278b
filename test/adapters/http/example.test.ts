import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { createExampleApp, openExampleStore } from '../../../examples/http/server.js';
import { endpoints, skipUnlessEnabled } from '../../helpers/stores.js';

// The example server of docs/http.md, on the store its config names.

async function serve(t: TestContext, env: Record<string, string>) {
  const store = await openExampleStore(env);
  t.after(async () => {
    await store.repository.clear();
    await store.repository.close();
  });
  const { app } = createExampleApp({
    repository: store.repository,
    ttlMs: store.ttlMs,
    leaseMs: store.leaseMs,
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise((resolve) => server.close(resolve)));
  return { store, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function charge(url: string, key: string, amount: number) {
  const response = await fetch(`${url}/charges`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
    body: JSON.stringify({ amount, currency: 'eur' }),
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
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
