/**
 * What the transactional mark costs in round trips on the real server, counted on the wire (a proxy of the
 * test's own between the repository's pool and PostgreSQL), so the count cannot creep back: one message in its
 * own transaction costs what the plain transaction does (BEGIN with the claim, the handler's INSERT, COMMIT),
 * and a batch transaction one round trip for BEGIN and every claim, per handler its own statements (no
 * savepoint until a handler that wrote fails: then the batch runs again with one per handler), and COMMIT: no confirm
 * where no outcome is kept, since the claim is written confirmed. And the claim's cached generic plan, made on a
 * young table, does not scan the table once it has grown.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import type pg from 'pg';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { PostgresRepository, postgresTransaction } from '../../src/repositories/postgres/index.js';
import { quoteTable, statements } from '../../src/repositories/postgres/sql.js';
import { createTestTable, testPool, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

interface Payment {
  readonly id: string;
}

describe('postgres transactional mark: round trips', { skip: skipUnlessEnabled('postgres') }, () => {
  const table = testTable('trips');
  const payments = testTable('payments');
  const pool = testPool(1);
  let drop: (() => Promise<void>) | undefined;
  before(async () => {
    drop = await createTestTable(table);
    await pool.query(`CREATE TABLE "${payments}" (id text PRIMARY KEY)`);
  });
  after(async () => {
    await pool.query(`DROP TABLE IF EXISTS "${payments}"`);
    await pool.end();
    await drop?.();
  });

  /** A repository whose one connection goes through a proxy that counts round trips. */
  async function open(t: TestContext): Promise<{ repository: PostgresRepository; proxy: TcpProxy }> {
    const server = new URL(endpoints.postgresUrl);
    const proxy = await TcpProxy.start({ host: server.hostname, port: Number(server.port || 5432) }, t);
    const url = new URL(endpoints.postgresUrl);
    url.host = proxy.address;
    const repository = await PostgresRepository.open({
      url: url.href,
      table,
      namespace: `trips-${randomUUID().slice(0, 8)}`,
      poolSize: 1,
    });
    t.after(() => repository.close());
    return { repository, proxy };
  }

  const insert = (payment: Payment, context: { readonly transaction?: unknown }) =>
    postgresTransaction(context).query(`INSERT INTO "${payments}" (id) VALUES ($1)`, [payment.id]);

  /** Round trips `work` makes, after one run of it that prepared the statements on the connection. */
  async function trips(proxy: TcpProxy, work: () => Promise<unknown>): Promise<number> {
    await work();
    const before = proxy.exchanges;
    await work();
    return proxy.exchanges - before;
  }

  const fresh = (n: number): Payment[] => Array.from({ length: n }, () => ({ id: randomUUID() }));

  it("one message, transaction 'message': BEGIN with the claim, the INSERT, COMMIT", async (t) => {
    const { repository, proxy } = await open(t);
    const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'message' });
    const count = await trips(proxy, async () => {
      const result = await consumer.process(fresh(1)[0] as Payment, insert);
      assert.equal(result.outcome, 'processed');
    });
    assert.equal(count, 3);
    // A duplicate: BEGIN with the claim that finds a live row, the read of that row, and the end of the
    // transaction (the claim answers only the ids it took, so a new id costs nothing more).
    const payment = fresh(1)[0] as Payment;
    await consumer.process(payment, insert);
    const before = proxy.exchanges;
    assert.equal((await consumer.process(payment, insert)).outcome, 'duplicate');
    assert.equal(proxy.exchanges - before, 3);
  });

  it("a batch, transaction 'batch': one round trip for BEGIN and every claim, none to confirm", async (t) => {
    const { repository, proxy } = await open(t);
    const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'batch' });
    const size = 10;
    // Per message its INSERT (no savepoint while no handler that wrote fails); then COMMIT.
    const perMessage = await trips(proxy, async () => {
      const { results } = await consumer.processBatch(fresh(size), insert);
      assert.deepEqual(new Set(results.map((r) => r.outcome)), new Set(['processed']));
    });
    assert.equal(perMessage, 1 + size + 1);
    // A whole-batch handler: BEGIN with the claims, its savepoint, its one INSERT, COMMIT.
    const wholeBatch = await trips(proxy, async () => {
      const { results } = await consumer.processBatch(fresh(size), {
        batch: async (items) => {
          const client = postgresTransaction((items[0] as (typeof items)[number]).context);
          await client.query(`INSERT INTO "${payments}" (id) SELECT unnest($1::text[])`, [
            items.map((item) => item.message.id),
          ]);
        },
      });
      assert.deepEqual(new Set(results.map((r) => r.outcome)), new Set(['processed']));
    });
    assert.equal(wholeBatch, 4);
  });

  it("a batch's handlers as they come: a first statement keeping a portal, two at once, none", async (t) => {
    const { repository, proxy } = await open(t);
    const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'batch' });
    const [portal, twice, none] = fresh(3) as [Payment, Payment, Payment];
    const seen: number[] = [];
    const { results } = await consumer.processBatch([portal, twice, none], async (payment, context) => {
      const client = postgresTransaction(context);
      if (payment === portal) {
        // `rows` keeps a portal open across round trips (the statement watch must pass it through as it is).
        const config = { text: 'SELECT g FROM generate_series(1, 3) g', rows: 1 } as pg.QueryConfig;
        const read = await client.query(config);
        seen.push(read.rows.length);
        await insert(payment, context);
      } else if (payment === twice) {
        // Two statements sent at once, before either was answered: both go, in order.
        const [read] = await Promise.all([client.query('SELECT 2 AS two'), insert(payment, context)]);
        seen.push(read.rows.length);
      }
    });
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'processed', 'processed'],
    );
    assert.deepEqual(seen, [3, 1]);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${payments}" WHERE id = ANY ($1)`, [
      [portal.id, twice.id],
    ]);
    assert.equal(rows[0]?.n, 2);
    // The connection went back to the pool as it came: its own query method (the statement count's is gone).
    await repository.transaction(async (transaction) => {
      const client = transaction.client as unknown as { query: unknown };
      assert.equal(Object.hasOwn(client, 'query'), false);
    });
    // A handler that sends nothing costs no savepoint: BEGIN with the claims, COMMIT.
    const idle = await trips(proxy, () => consumer.processBatch(fresh(5), async () => {}));
    assert.equal(idle, 2);
  });

  it('a batch sets no savepoint until a handler that wrote fails; then it runs again with them', async (t) => {
    const { repository, proxy } = await open(t);
    const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'batch' });
    const calls = new Map<string, number>();
    const failing =
      (when: 'before' | 'after') => async (payment: Payment, context: { transaction?: unknown }) => {
        calls.set(payment.id, (calls.get(payment.id) ?? 0) + 1);
        if (payment.id.startsWith('fail') && when === 'before') throw new Error('refused before writing');
        await insert(payment, context);
        if (payment.id.startsWith('fail')) throw new Error('failed after writing');
      };
    // A handler that fails before it sends a statement needs no savepoint: one run, no savepoint at all.
    const early = () => [...fresh(2), { id: `fail-${randomUUID()}` }, ...fresh(2)];
    await consumer.processBatch(early(), failing('before'));
    const batch = early();
    calls.clear();
    const before = proxy.exchanges;
    const { results } = await consumer.processBatch(batch, failing('before'));
    // BEGIN with the claims, four INSERTs, the failed one's claim released, COMMIT.
    assert.equal(proxy.exchanges - before, 1 + 4 + 1 + 1);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'processed', 'failed', 'processed', 'processed'],
    );
    assert.deepEqual([...calls.values()], [1, 1, 1, 1, 1]);

    // One that wrote and then failed: the batch is rolled back and runs again from the start with a savepoint per
    // handler. The handlers up to it run twice; each outcome is counted once.
    const late = [...fresh(2), { id: `fail-${randomUUID()}` }, ...fresh(2)];
    calls.clear();
    const stats = { ...consumer.stats };
    const second = await consumer.processBatch(late, failing('after'));
    assert.deepEqual(
      second.results.map((r) => r.outcome),
      ['processed', 'processed', 'failed', 'processed', 'processed'],
    );
    assert.match(String((second.results[2] as { error?: unknown }).error), /failed after writing/);
    assert.deepEqual([...calls.values()], [2, 2, 2, 1, 1]);
    assert.equal(consumer.stats.processed - stats.processed, 4);
    assert.equal(consumer.stats.failed - stats.failed, 1);
    const { rows } = await pool.query(
      `SELECT (SELECT count(*)::int FROM "${table}" WHERE id = ANY ($1)) AS marks,
        (SELECT count(*)::int FROM "${payments}" WHERE id = ANY ($1)) AS effects`,
      [late.map((p) => p.id)],
    );
    assert.deepEqual(rows[0], { marks: 4, effects: 4 });
  });

  it('a one-id claim runs on the plan the connection cached, not a plan made again per message', async (t) => {
    const { repository } = await open(t);
    const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'message' });
    for (const payment of fresh(12)) await consumer.process(payment, insert);
    // Asked on the repository's one connection, where its statements are prepared.
    const { rows } = await repository.transaction((transaction) =>
      postgresTransaction({ transaction: transaction.client }).query<{ generic: number; custom: number }>(
        `SELECT generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements
          WHERE name LIKE 'idem\\_claim%'`,
      ),
    );
    // PostgreSQL makes five custom plans before it weighs the generic one (more if autoanalyze invalidates it).
    assert.equal(rows.length, 1);
    const [{ generic, custom }] = rows as [{ generic: number; custom: number }];
    assert.ok(generic > custom, `generic plans ${generic}, custom plans ${custom}`);
  });

  it('a failed handler leaves no mark and no effect, in a message or a batch transaction', async (t) => {
    const { repository } = await open(t);
    const stored = async (ids: readonly string[]) => {
      const { rows } = await pool.query(
        `SELECT (SELECT count(*)::int FROM "${table}" WHERE id = ANY ($1)) AS marks,
          (SELECT count(*)::int FROM "${payments}" WHERE id = ANY ($1)) AS effects`,
        [ids],
      );
      return rows[0] as { marks: number; effects: number };
    };
    const failing = async (payment: Payment, context: { readonly transaction?: unknown }) => {
      await insert(payment, context);
      if (payment.id.startsWith('fail')) throw new Error('boom');
    };
    const message = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'message' });
    const one = { id: `fail-${randomUUID()}` };
    await assert.rejects(message.process(one, failing), /boom/);
    assert.deepEqual(await stored([one.id]), { marks: 0, effects: 0 });

    const batch = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'batch' });
    const ok = fresh(2);
    const bad = { id: `fail-${randomUUID()}` };
    const { results } = await batch.processBatch([ok[0] as Payment, bad, ok[1] as Payment], failing);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'failed', 'processed'],
    );
    assert.deepEqual(await stored([bad.id]), { marks: 0, effects: 0 });
    assert.deepEqual(await stored(ok.map((p) => p.id)), { marks: 2, effects: 2 });
    // The failed one is new again: a redelivery handles it.
    const again = await batch.processBatch([bad], insert);
    assert.equal(again.results[0]?.outcome, 'processed');
  });

  it('generic plans made on a young table do not scan the grown table: the claim, a read', async (t) => {
    const young = testTable('plans');
    t.after(await createTestTable(young));
    const quoted = quoteTable(young);
    const client = await pool.connect();
    t.after(() => client.release());
    const fill = (from: number, n: number) =>
      client.query(
        `INSERT INTO ${quoted} (namespace, id, state, expires_at, forget_at)
          SELECT 'plans', 'old-' || g, 'confirmed', 1e13, 1e13 FROM generate_series($1::int, $2::int) g`,
        [from, from + n - 1],
      );
    // The plan a connection caches on a table that autoanalyze saw with a handful of rows.
    await fill(1, 8);
    await client.query(`ANALYZE ${quoted}`);
    await client.query('SET plan_cache_mode = force_generic_plan');
    t.after(() =>
      client.query(
        'RESET plan_cache_mode; DEALLOCATE plan_claim; DEALLOCATE plan_read; DEALLOCATE plan_claim_one',
      ),
    );
    await client.query(`PREPARE plan_claim AS ${statements(young).claim.text}`);
    await client.query(`PREPARE plan_read AS ${statements(young).read.text}`);
    await client.query(`PREPARE plan_claim_one AS ${statements(young).claimOne.text}`);
    await fill(100, 5_000);
    const ids = Array.from({ length: 50 }, () => `'${randomUUID()}'`).join(', ');
    await client.query('BEGIN');
    const { rows } = await client.query(
      `EXPLAIN (ANALYZE, COSTS OFF) EXECUTE plan_claim('plans', NULL, ARRAY[${ids}]::text[], '{}', '{}', '{}', ` +
        `'in-flight', 60000, 1000, 'o', 60000)`,
    );
    const one = await client.query(
      `EXPLAIN (ANALYZE, COSTS OFF) EXECUTE plan_claim_one('plans', NULL, '${randomUUID()}', NULL, NULL, NULL, ` +
        `'in-flight', 60000, 1000, 'o', 60000)`,
    );
    // An id the table holds (live): the write finds it through the arbiter index and leaves it.
    const held = await client.query(
      `EXPLAIN (ANALYZE, COSTS OFF) EXECUTE plan_claim_one('plans', NULL, 'old-4000', NULL, NULL, NULL, ` +
        `'in-flight', 60000, 1000, 'o', 60000)`,
    );
    await client.query('ROLLBACK');
    // The claim is the write alone: every id, new or held, reaches the table through the arbiter index only.
    for (const explained of [rows, one.rows, held.rows]) {
      const plan = explained.map((row) => row['QUERY PLAN'] as string).join('\n');
      assert.match(plan, /Conflict Arbiter Indexes: /, plan);
      assert.doesNotMatch(plan, /Scan .* on /, plan);
    }
    // A read (lazy mode's check, `get`): one primary-key lookup per id, never a scan of the namespace.
    const read = await client.query(
      `EXPLAIN (ANALYZE, COSTS OFF) EXECUTE plan_read('plans', ARRAY['old-1', 'old-4000', 'new']::text[], NULL)`,
    );
    const readPlan = read.rows.map((row) => row['QUERY PLAN'] as string).join('\n');
    assert.match(readPlan, /Index Cond: \(\(namespace = \$1\) AND \(id = u\.id\)\)/, readPlan);
    assert.doesNotMatch(readPlan, /Seq Scan|Rows Removed by Filter/, readPlan);
  });
});
