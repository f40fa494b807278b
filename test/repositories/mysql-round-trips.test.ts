/**
 * What the transactional mark costs in round trips on MariaDB (the test stack's server), counted on the wire (a
 * proxy of the test's own between the repository's pool and the server), so the count cannot creep back. One
 * message in its own transaction costs what a plain BEGIN, INSERT, COMMIT costs: the session settings, the
 * transaction's savepoint and the claim (written confirmed: no confirm) in one compound statement; the handler's
 * INSERT; the savepoint's release (it proves the server did not roll the transaction back) and the settings back,
 * whose return to autocommit commits, in another. A batch: the settings and savepoint, one claim for every id,
 * each handler's own statements (no savepoint per handler until a handler that wrote fails: then the batch runs
 * again with one each, never released: the next one replaces it), and the end. MySQL has no
 * compound statement outside stored programs: there the start and the end take two round trips each.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { MySqlRepository, mysqlTransaction } from '../../src/repositories/mysql/index.js';
import { createTestTable, testPool, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

interface Payment {
  readonly id: string;
}

describe('mysql transactional mark: round trips', { skip: skipUnlessEnabled('mysql') }, () => {
  const table = testTable('trips');
  const payments = testTable('payments');
  const pool = testPool(1);
  let drop: (() => Promise<void>) | undefined;
  /** Round trips the start and the end each take beyond one: none on MariaDB. */
  let extra = 0;
  before(async () => {
    const [rows] = await pool.query('SELECT @@version AS version');
    extra = /mariadb/i.test(String((rows as { version: unknown }[])[0]?.version)) ? 0 : 1;
    drop = await createTestTable(table);
    await pool.query(`CREATE TABLE \`${payments}\` (id varchar(64) PRIMARY KEY) ENGINE=InnoDB`);
  });
  after(async () => {
    await pool.query(`DROP TABLE IF EXISTS \`${payments}\``);
    await pool.end();
    await drop?.();
  });

  /** A repository whose one connection goes through a proxy that counts round trips. */
  async function open(t: TestContext): Promise<{ repository: MySqlRepository; proxy: TcpProxy }> {
    const server = new URL(endpoints.mysqlUrl);
    const proxy = await TcpProxy.start({ host: server.hostname, port: Number(server.port || 3306) }, t);
    const url = new URL(endpoints.mysqlUrl);
    url.host = proxy.address;
    const repository = await MySqlRepository.open({
      url: url.href,
      table,
      namespace: `trips-${randomUUID().slice(0, 8)}`,
      poolSize: 1,
    });
    t.after(() => repository.close());
    return { repository, proxy };
  }

  const insert = (payment: Payment, context: { readonly transaction?: unknown }) =>
    mysqlTransaction(context).execute(`INSERT INTO \`${payments}\` (id) VALUES (?)`, [payment.id]);

  /** Round trips `work` makes, after one run of it that prepared the statements on the connection. */
  async function trips(proxy: TcpProxy, work: () => Promise<unknown>): Promise<number> {
    await work();
    const before = proxy.exchanges;
    await work();
    return proxy.exchanges - before;
  }

  const fresh = (n: number): Payment[] => Array.from({ length: n }, () => ({ id: randomUUID() }));

  it("one message, transaction 'message': the round trips of a plain transaction", async (t) => {
    const { repository, proxy } = await open(t);
    const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'message' });
    const count = await trips(proxy, async () => {
      assert.equal((await consumer.process(fresh(1)[0] as Payment, insert)).outcome, 'processed');
    });
    // The claim goes with the start on MariaDB; on MySQL it needs a round trip of its own.
    assert.equal(count, 3 + 3 * extra);
  });

  it("a batch, transaction 'batch': one claim for every id, none to confirm", async (t) => {
    const { repository, proxy } = await open(t);
    const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'batch' });
    const size = 10;
    const count = await trips(proxy, async () => {
      const { results } = await consumer.processBatch(fresh(size), insert);
      assert.deepEqual(new Set(results.map((r) => r.outcome)), new Set(['processed']));
    });
    // Settings with the savepoint, the claim; per message its INSERT (no savepoint until a handler that wrote
    // fails); the end.
    assert.equal(count, 3 + 2 * extra + size);
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
    const batch = () => [...fresh(2), { id: `fail-${randomUUID()}` }, ...fresh(2)];
    // A handler that fails before it sends a statement needs no savepoint: one run, each handler called once.
    await consumer.processBatch(batch(), failing('before'));
    const early = batch();
    calls.clear();
    const start = proxy.exchanges;
    const first = await consumer.processBatch(early, failing('before'));
    // The start, the claim, four INSERTs, the failed one's claim released, the end.
    assert.equal(proxy.exchanges - start, 3 + 2 * extra + 4 + 1);
    assert.deepEqual(
      first.results.map((r) => r.outcome),
      ['processed', 'processed', 'failed', 'processed', 'processed'],
    );
    assert.deepEqual([...calls.values()], [1, 1, 1, 1, 1]);
    // One that wrote and then failed: rolled back, and run again from the start with a savepoint per handler.
    const late = batch();
    calls.clear();
    const stats = { ...consumer.stats };
    const second = await consumer.processBatch(late, failing('after'));
    assert.deepEqual(
      second.results.map((r) => r.outcome),
      ['processed', 'processed', 'failed', 'processed', 'processed'],
    );
    assert.deepEqual([...calls.values()], [2, 2, 2, 1, 1]);
    assert.equal(consumer.stats.processed - stats.processed, 4);
    assert.equal(consumer.stats.failed - stats.failed, 1);
    const ids = late.map((p) => p.id);
    const [rows] = await pool.query(
      `SELECT (SELECT count(*) FROM \`${table}\` WHERE id IN (?)) AS marks,
        (SELECT count(*) FROM \`${payments}\` WHERE id IN (?)) AS effects`,
      [ids, ids],
    );
    const row = (rows as { marks: unknown; effects: unknown }[])[0];
    assert.deepEqual({ marks: Number(row?.marks), effects: Number(row?.effects) }, { marks: 4, effects: 4 });
  });

  it('a failed handler leaves no mark and no effect; the rest of its batch commits', async (t) => {
    const { repository } = await open(t);
    const stored = async (ids: readonly string[]) => {
      const [rows] = await pool.query(
        `SELECT (SELECT count(*) FROM \`${table}\` WHERE id IN (?)) AS marks,
          (SELECT count(*) FROM \`${payments}\` WHERE id IN (?)) AS effects`,
        [ids, ids],
      );
      const row = (rows as { marks: number; effects: number }[])[0];
      return { marks: Number(row?.marks), effects: Number(row?.effects) };
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
    const again = await batch.processBatch([bad], insert);
    assert.equal(again.results[0]?.outcome, 'processed');
  });
});
