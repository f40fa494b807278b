/**
 * The HTTP adapter over the SQL stores runs its claims without a SQL transaction: the route cannot write
 * through one (it does not get it), so none is held open while it runs. A hung route frees its key at the lease
 * end like on any store, and more routes than the pool has connections run at once.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it, type TestContext } from 'node:test';
import express from 'express';
import { idempotencyKey } from '../../../src/adapters/http/index.js';
import { MySqlRepository } from '../../../src/repositories/mysql/index.js';
import { PostgresRepository } from '../../../src/repositories/postgres/index.js';
import type { IdempotentRepository } from '../../../src/store/types.js';
import * as mysql from '../../helpers/mysql.js';
import * as postgres from '../../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../../helpers/stores.js';

const POOL_SIZE = 2;
/** Routes in flight at once: more than the pool's connections. */
const CONCURRENT = Number(process.env.IDEM_TEST_HTTP_SQL_CONCURRENT ?? POOL_SIZE + 3);
/** How long a route waits for the others to be in flight with it before it gives up. */
const GATHER_MS = 3_000;
const LEASE_MS = 600;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const stores = {
  postgres: {
    skip: skipUnlessEnabled('postgres'),
    table: postgres.createTestTable,
    name: postgres.testTable,
    open: (table: string): Promise<IdempotentRepository> =>
      PostgresRepository.open({
        url: endpoints.postgresUrl,
        table,
        poolSize: POOL_SIZE,
        lockTimeoutMs: 1_000,
        connectTimeoutMs: 1_000,
      }),
  },
  mysql: {
    skip: skipUnlessEnabled('mysql'),
    table: mysql.createTestTable,
    name: mysql.testTable,
    open: (table: string): Promise<IdempotentRepository> =>
      MySqlRepository.open({ url: endpoints.mysqlUrl, table, poolSize: POOL_SIZE, lockTimeoutMs: 1_000 }),
  },
};

/**
 * An app with two routes behind the adapter: `POST /gather` waits until {@link CONCURRENT} requests are inside
 * it (at most {@link GATHER_MS}) and answers how many were; `POST /hang` never answers.
 */
async function startApp(t: TestContext, repository: IdempotentRepository) {
  const effects = { gather: 0, hang: 0 };
  let inside = 0;
  const app = express();
  app.use(express.json());
  const guard = idempotencyKey({ repository, leaseMs: LEASE_MS });
  app.post('/gather', guard, async (_req, res) => {
    effects.gather++;
    inside++;
    const deadline = Date.now() + GATHER_MS;
    while (inside < CONCURRENT && Date.now() < deadline) await sleep(10);
    res.status(201).json({ together: inside });
  });
  app.post('/hang', guard, () => {
    effects.hang++;
  });
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, effects };
}

async function post(url: string, key: string, signal?: AbortSignal) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': `"${key}"` },
    body: '{"amount":1}',
    ...(signal === undefined ? {} : { signal }),
  });
  return { status: response.status, text: await response.text() };
}

for (const [storeName, store] of Object.entries(stores)) {
  describe(`HTTP adapter over ${storeName}`, { skip: store.skip }, () => {
    const table = store.name('http');
    let drop: () => Promise<void>;
    before(async () => {
      drop = await store.table(table);
    });
    after(async () => {
      // Bounded too: a transaction a hung route left open would keep the DROP waiting.
      await Promise.race([drop?.(), sleep(5_000)]);
    });

    async function open(t: TestContext) {
      const repository = await store.open(table);
      // Bounded: a store that a hung route still holds a connection of would never finish closing.
      t.after(() => Promise.race([repository.close(), sleep(2_000)]));
      return startApp(t, repository);
    }

    it(`runs more routes at once (${CONCURRENT}) than the pool has connections (${POOL_SIZE})`, async (t) => {
      const app = await open(t);
      const replies = await Promise.all(
        Array.from({ length: CONCURRENT }, () => post(`${app.url}/gather`, crypto.randomUUID())),
      );
      for (const reply of replies) {
        assert.equal(reply.status, 201, reply.text);
        assert.equal(JSON.parse(reply.text).together, CONCURRENT, 'the routes did not all run at once');
      }
      assert.equal(app.effects.gather, CONCURRENT);
    });

    it('a hung route whose client left holds no connection; its running work keeps its key past the lease', async (t) => {
      const app = await open(t);
      const key = crypto.randomUUID();
      const abort = new AbortController();
      const hung = post(`${app.url}/hang`, key, abort.signal).catch(() => 'aborted');
      while (app.effects.hang === 0) await sleep(10);
      abort.abort();
      assert.equal(await hung, 'aborted');
      /** Sends `key` to the hanging route; answers whether the route ran for it (within 3 s), then leaves. */
      const runs = async (key: string) => {
        const before = app.effects.hang;
        const abort = new AbortController();
        const reply = post(`${app.url}/hang`, key, abort.signal).catch(() => undefined);
        const deadline = Date.now() + 3_000;
        while (app.effects.hang === before && Date.now() < deadline) await sleep(10);
        abort.abort();
        const answered = await reply;
        return app.effects.hang > before ? 'ran' : (answered?.status ?? 'no answer');
      };
      // Meanwhile the pool serves other requests (the hung route holds none of its connections).
      for (let i = 0; i < POOL_SIZE + 1; i++) assert.equal(await runs(crypto.randomUUID()), 'ran');
      await sleep(LEASE_MS + 300);
      // Past the lease the key still belongs to the route that runs (its lease is renewed while it runs, whoever is
      // listening: issue 32, H1), and it is the route's work that holds it, not a held-open SQL transaction.
      assert.equal(await runs(key), 409);
      // The pool still serves other keys.
      assert.equal(await runs(crypto.randomUUID()), 'ran');
    });
  });
}
