/**
 * The consumer's `transaction: 'batch'` on the real PostgreSQL when a handler catches the error of its own SQL
 * statement: PostgreSQL has aborted the transaction, so the consumer rolls back to that message's savepoint,
 * fails that message with a SwallowedStatementError and goes on with the batch. The other messages commit with
 * their marks; the failed one left neither effect nor mark.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { IdempotentConsumer } from '../../src/consumer/idempotent-consumer.js';
import type { BatchItem, HandlerContext } from '../../src/consumer/types.js';
import { SwallowedStatementError } from '../../src/errors.js';
import { PostgresRepository, postgresTransaction } from '../../src/repositories/postgres/index.js';
import { createTestTable, testPool, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

interface Msg {
  readonly id: string;
  /** The handler runs a failing statement and catches its error. */
  readonly swallow?: boolean;
}

describe('postgres: a handler that swallows its own statement error', {
  skip: skipUnlessEnabled('postgres'),
}, () => {
  const table = testTable('txsw');
  // No unique key: an effect written twice shows as a second row.
  const effects = `idem_fx_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  let drop: (() => Promise<void>) | undefined;
  const pool = testPool();

  before(async () => {
    drop = await createTestTable(table);
    await pool.query(`CREATE TABLE "${effects}" (message_id text NOT NULL)`);
  });
  after(async () => {
    await pool.query(`DROP TABLE IF EXISTS "${effects}"`);
    await pool.end();
    await drop?.();
  });

  async function open(t: TestContext): Promise<PostgresRepository> {
    const repository = await PostgresRepository.open({
      url: endpoints.postgresUrl,
      table,
      namespace: `txsw-${randomUUID().slice(0, 8)}`,
    });
    t.after(() => repository.close());
    return repository;
  }

  /** Writes the message's effect; a `swallow` message then runs a failing statement and catches its error. */
  async function handler(message: Msg, context: HandlerContext): Promise<string> {
    const db = postgresTransaction(context);
    await db.query(`INSERT INTO "${effects}" (message_id) VALUES ($1)`, [message.id]);
    if (message.swallow) await db.query('SELECT 1/0').catch(() => undefined);
    return `done ${message.id}`;
  }

  async function effectsOf(ids: readonly string[]): Promise<number[]> {
    const { rows } = await pool.query(
      `SELECT message_id AS id, count(*)::int AS n FROM "${effects}" WHERE message_id = ANY($1) GROUP BY message_id`,
      [ids],
    );
    const counts = new Map((rows as { id: string; n: number }[]).map((row) => [row.id, row.n]));
    return ids.map((id) => counts.get(id) ?? 0);
  }

  const newId = (label: string) => `${label}-${randomUUID()}`;

  it("transaction 'batch': that message fails alone, undone to its savepoint; the batch goes on and commits", async (t) => {
    const repository = await open(t);
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', transaction: 'batch' });
    const ids = [newId('p1'), newId('p2'), newId('p3'), newId('p4')];
    const batch: Msg[] = ids.map((id, i) => ({ id, swallow: i === 1 }));
    const { results } = await consumer.processBatch(batch, handler);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'failed', 'processed', 'processed'],
    );
    const failure = results[1]?.error;
    assert.ok(failure instanceof SwallowedStatementError, String(failure));
    assert.match(failure.message, /handler of message .*p2.* swallowed a statement error/);
    assert.deepEqual(await effectsOf(ids), [1, 0, 1, 1]);
    assert.deepEqual(await repository.containsMany(ids), [true, false, true, true]);
    // The redelivery runs the failed message once more (it no longer swallows) and nothing else.
    const again = await consumer.processBatch(
      ids.map((id) => ({ id })),
      handler,
    );
    assert.deepEqual(
      again.results.map((r) => r.outcome),
      ['duplicate', 'processed', 'duplicate', 'duplicate'],
    );
    assert.deepEqual(await effectsOf(ids), [1, 1, 1, 1]);
  });

  it('a whole-batch handler that swallows one: every item of it fails, nothing of it commits', async (t) => {
    const repository = await open(t);
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', transaction: 'batch' });
    const ids = [newId('w1'), newId('w2')];
    const { results } = await consumer.processBatch(
      ids.map((id, i) => ({ id, swallow: i === 1 })),
      {
        batch: async (items: readonly BatchItem<Msg>[]) => {
          for (const item of items) await handler(item.message, item.context);
        },
      },
    );
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['failed', 'failed'],
    );
    assert.ok(results[0]?.error instanceof SwallowedStatementError, String(results[0]?.error));
    assert.match(String(results[0]?.error), /whole-batch handler swallowed a statement error/);
    assert.deepEqual(await effectsOf(ids), [0, 0]);
    assert.deepEqual(await repository.containsMany(ids), [false, false]);
  });
});
