/**
 * The consumer's `transaction` option on the real MariaDB when the server rolls the whole transaction back under
 * it: a statement of the handler's own is made a deadlock victim by a second connection. Nothing of that
 * transaction may commit (no effect without its mark, no mark without its effect): the consumer runs it again,
 * and after a redelivery every effect is there exactly once. Also: a statement error the handler catches leaves
 * a MySQL transaction usable (unlike PostgreSQL's), so the batch goes on and the handler's writes commit.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import type { PoolConnection } from 'mysql2/promise';
import { IdempotentConsumer } from '../../src/consumer/idempotent-consumer.js';
import type { HandlerContext } from '../../src/consumer/types.js';
import { RepositoryError } from '../../src/errors.js';
import { MySqlRepository, mysqlTransaction } from '../../src/repositories/mysql/index.js';
import { createTestTable, testPool, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

interface Msg {
  readonly id: string;
}

/** Rows the deadlock's other transaction writes first, so that InnoDB picks the consumer's as the victim. */
const WEIGHT_ROWS = 200;

const ER_LOCK_DEADLOCK = 1213;

describe('mysql: the server rolls a consumer transaction back', { skip: skipUnlessEnabled('mysql') }, () => {
  const table = testTable('txrb');
  const suffix = randomUUID().replaceAll('-', '').slice(0, 12);
  // No unique key: an effect written twice shows as a second row.
  const effects = `idem_fx_${suffix}`;
  const locks = `idem_lk_${suffix}`;
  const weight = `idem_wt_${suffix}`;
  let drop: (() => Promise<void>) | undefined;
  const pool = testPool(4);

  before(async () => {
    drop = await createTestTable(table);
    await pool.query(`CREATE TABLE \`${effects}\` (message_id VARCHAR(128) NOT NULL) ENGINE = InnoDB`);
    await pool.query(`CREATE TABLE \`${locks}\` (k INT PRIMARY KEY, v INT NOT NULL) ENGINE = InnoDB`);
    await pool.query(`INSERT INTO \`${locks}\` (k, v) VALUES (1, 0), (2, 0)`);
    await pool.query(`CREATE TABLE \`${weight}\` (n INT NOT NULL) ENGINE = InnoDB`);
  });
  after(async () => {
    await pool.query(`DROP TABLE IF EXISTS \`${effects}\`, \`${locks}\`, \`${weight}\``);
    await pool.end();
    await drop?.();
  });

  async function open(t: TestContext): Promise<MySqlRepository> {
    const repository = await MySqlRepository.open({
      url: endpoints.mysqlUrl,
      table,
      namespace: `txrb-${randomUUID().slice(0, 8)}`,
    });
    t.after(() => repository.close());
    return repository;
  }

  /** The effect of `id`, written through the transaction. */
  function writeEffect(db: PoolConnection, id: string): Promise<unknown> {
    return db.execute(`INSERT INTO \`${effects}\` (message_id) VALUES (?)`, [id]);
  }

  /** {@link writeEffect} as a statement that needs lock row 1 first: the one a deadlock is made around. */
  function writeLockedEffect(db: PoolConnection, id: string): Promise<unknown> {
    return db.execute(
      `INSERT INTO \`${effects}\` (message_id) SELECT ? FROM \`${locks}\` WHERE k = 1 FOR UPDATE`,
      [id],
    );
  }

  /**
   * Runs `statement` (one that needs lock row 1) on the handler's connection `db` as a deadlock victim and answers the error it failed with.
   * A second connection holds lock row 1 (and wrote many rows: InnoDB rolls back the lighter transaction), `db`
   * takes row 2, then each asks for the other's row. Either order of the two requests closes the cycle, so
   * nothing here waits on time. The second connection then rolls back, leaving the rows free.
   */
  async function asDeadlockVictim(db: PoolConnection, statement: () => Promise<unknown>): Promise<unknown> {
    const other = await pool.getConnection();
    try {
      await other.query('START TRANSACTION');
      await other.query(`UPDATE \`${locks}\` SET v = v + 1 WHERE k = 1`);
      const values = Array.from({ length: WEIGHT_ROWS }, (_, i) => `(${i})`).join(', ');
      await other.query(`INSERT INTO \`${weight}\` (n) VALUES ${values}`);
      await db.query(`UPDATE \`${locks}\` SET v = v + 1 WHERE k = 2`);
      const failed = statement().then(
        () => undefined,
        (error: unknown) => error,
      );
      // Waits for row 2 until the server resolves the deadlock by rolling the handler's transaction back.
      await other.query(`UPDATE \`${locks}\` SET v = v + 1 WHERE k = 2`);
      const error = await failed;
      assert.equal((error as { errno?: number } | undefined)?.errno, ER_LOCK_DEADLOCK, String(error));
      return error;
    } finally {
      await other.query('ROLLBACK').catch(() => undefined);
      other.release();
    }
  }

  /** Effect rows of each id, seen from outside any transaction. */
  async function effectsOf(ids: readonly string[]): Promise<number[]> {
    const [rows] = await pool.query(
      `SELECT message_id AS id, COUNT(*) AS n FROM \`${effects}\` WHERE message_id IN (?) GROUP BY message_id`,
      [ids],
    );
    const counts = new Map((rows as { id: string; n: unknown }[]).map((row) => [row.id, Number(row.n)]));
    return ids.map((id) => counts.get(id) ?? 0);
  }

  const newId = (label: string) => `${label}-${randomUUID()}`;

  it("transaction 'batch': a handler's statement made a deadlock victim reruns the whole batch; every effect once", async (t) => {
    const repository = await open(t);
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', transaction: 'batch' });
    const batch = [{ id: newId('a1') }, { id: newId('a2') }, { id: newId('a3') }];
    const ids = batch.map((m) => m.id);
    const calls = new Map<string, number>();
    const handler = async (message: Msg, context: HandlerContext) => {
      const db = mysqlTransaction(context);
      const call = (calls.get(message.id) ?? 0) + 1;
      calls.set(message.id, call);
      // The first run of the first message: its INSERT is the deadlock victim, and the handler lets it propagate.
      if (message.id === ids[0] && call === 1)
        throw await asDeadlockVictim(db, () => writeLockedEffect(db, message.id));
      await writeEffect(db, message.id);
    };
    const first = await consumer.processBatch(batch, handler);
    assert.deepEqual(await effectsOf(ids), [1, 1, 1], 'an effect committed without its mark, or not at all');
    assert.deepEqual(
      first.results.map((r) => r.outcome),
      ['processed', 'processed', 'processed'],
    );
    assert.equal(
      calls.get(ids[0] as string),
      2,
      'the batch was not run again after the server rolled it back',
    );
    for (const id of ids) assert.equal((await repository.get(id))?.state, 'confirmed');
    // The redelivery finds every id marked and writes nothing.
    const again = await consumer.processBatch(batch, handler);
    assert.deepEqual(
      again.results.map((r) => r.outcome),
      ['duplicate', 'duplicate', 'duplicate'],
    );
    assert.deepEqual(await effectsOf(ids), [1, 1, 1]);
  });

  for (const mode of ['eager', 'lazy'] as const) {
    it(`transaction 'message' (${mode}): a handler that retries its deadlocked statement reruns; its effect commits with its mark once`, async (t) => {
      const repository = await open(t);
      const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', mode });
      const id = newId('m');
      const [part1, part2] = [`${id}:1`, `${id}:2`];
      let calls = 0;
      const handler = async (_message: Msg, context: HandlerContext) => {
        const db = mysqlTransaction(context);
        calls++;
        await db.execute(`INSERT INTO \`${effects}\` (message_id) VALUES (?)`, [part1]);
        if (calls > 1) {
          await writeEffect(db, part2);
          return;
        }
        // The usual MySQL habit: run the deadlocked statement again. The server has rolled back part 1 already.
        await asDeadlockVictim(db, () => writeLockedEffect(db, part2));
        await writeLockedEffect(db, part2);
      };
      const first = await consumer.process({ id }, handler);
      assert.deepEqual(
        await effectsOf([part1, part2]),
        [1, 1],
        'the effect committed in part, or without its mark',
      );
      assert.equal(first.outcome, 'processed');
      assert.equal(calls, 2, 'the transaction was not run again after the server rolled it back');
      assert.equal((await repository.get(id))?.state, 'confirmed');
      const again = await consumer.process({ id }, handler);
      assert.equal(again.outcome, 'duplicate');
      assert.deepEqual(await effectsOf([part1, part2]), [1, 1]);
    });
  }

  it('a batch rolled back by the server on every run fails as a whole: the call rejects (retryable), nothing commits', async (t) => {
    const repository = await open(t);
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', transaction: 'batch' });
    const batch = [{ id: newId('b1') }, { id: newId('b2') }, { id: newId('b3') }];
    const ids = batch.map((m) => m.id);
    let victims = 0;
    let deadlocks = true;
    const handler = async (message: Msg, context: HandlerContext) => {
      const db = mysqlTransaction(context);
      // The last message of every run: the effects written before it are rolled back with it.
      if (deadlocks && message.id === ids[2]) {
        victims++;
        throw await asDeadlockVictim(db, () => writeLockedEffect(db, message.id));
      }
      await writeEffect(db, message.id);
    };
    await assert.rejects(consumer.processBatch(batch, handler), (error: unknown) => {
      assert.ok(error instanceof RepositoryError, String(error));
      assert.equal(error.retryable, true);
      assert.match(error.message, /rolled the transaction back/);
      return true;
    });
    assert.equal(victims, 3, 'the batch runs three times in all');
    assert.deepEqual(await effectsOf(ids), [0, 0, 0]);
    assert.deepEqual(await repository.containsMany(ids), [false, false, false]);
    deadlocks = false;
    const retried = await consumer.processBatch(batch, handler);
    assert.deepEqual(
      retried.results.map((r) => r.outcome),
      ['processed', 'processed', 'processed'],
    );
    assert.deepEqual(await effectsOf(ids), [1, 1, 1]);
  });

  it("transaction 'batch': a statement error the handler catches leaves the MySQL transaction usable; the batch goes on", async (t) => {
    const repository = await open(t);
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', transaction: 'batch' });
    const batch = [{ id: newId('c1') }, { id: newId('c2') }, { id: newId('c3') }];
    const ids = batch.map((m) => m.id);
    const handler = async (message: Msg, context: HandlerContext) => {
      const db = mysqlTransaction(context);
      await writeEffect(db, message.id);
      // MySQL rolls back the failed statement alone: the handler's write above and the transaction stand.
      if (message.id === ids[1]) await db.query('SELECT * FROM idem_no_such_table').catch(() => undefined);
    };
    const { results } = await consumer.processBatch(batch, handler);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'processed', 'processed'],
    );
    assert.deepEqual(await effectsOf(ids), [1, 1, 1]);
    assert.deepEqual(await repository.containsMany(ids), [true, true, true]);
  });
});
