import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import pg from 'pg';
import { applyPayment, type InboxDatabase, kyselyOn } from '../../examples/postgres-inbox/kysely.js';
import { createPaymentsTable, type Payment } from '../../examples/postgres-inbox/payments.js';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { migrate, PostgresRepository } from '../../src/repositories/postgres/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

// The Kysely snippet of docs/postgres-inbox.md (examples/postgres-inbox/kysely.ts), run for real: its queries
// go through the consumer's transaction, so they commit and roll back with the mark.

/** A pool on a fresh schema (first on its search_path) holding `payments` and the marks; dropped after. */
async function freshSchema(t: TestContext): Promise<pg.Pool> {
  const schema = `kysely_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Pool({ connectionString: endpoints.postgresUrl, max: 1 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  const url = new URL(endpoints.postgresUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const pool = new pg.Pool({ connectionString: url.href, max: 3 });
  t.after(async () => {
    await pool.end();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  });
  await createPaymentsTable(pool);
  return pool;
}

async function rows(pool: pg.Pool): Promise<{ message_id: string; amount: string }[]> {
  return (await pool.query('SELECT message_id, amount::text AS amount FROM payments ORDER BY id')).rows;
}

describe('Kysely in the consumer’s transaction', { skip: skipUnlessEnabled('postgres') }, () => {
  it('runs every query on the one client it is given, inside that client’s transaction', async (t) => {
    const pool = await freshSchema(t);
    const client = await pool.connect();
    try {
      const db = kyselyOn<InboxDatabase>(client);
      await client.query('BEGIN');
      await db.insertInto('payments').values({ message_id: 'rolled-back', amount: 1 }).execute();
      // Two queries at once share the one client (pg queues them), both in the transaction.
      const [seen] = await Promise.all([
        db.selectFrom('payments').select('message_id').execute(),
        db.insertInto('payments').values({ message_id: 'rolled-back-too', amount: 2 }).execute(),
      ]);
      assert.deepEqual(seen, [{ message_id: 'rolled-back' }]);
      assert.deepEqual(await rows(pool), [], 'nothing is visible outside the transaction');
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      await db.insertInto('payments').values({ message_id: 'committed', amount: 3 }).execute();
      await client.query('COMMIT');
      assert.deepEqual(await rows(pool), [{ message_id: 'committed', amount: '3' }]);
      await db.destroy(); // ends nothing: the client stays the caller's
      assert.equal((await client.query('SELECT 1 AS one')).rows[0].one, 1);
    } finally {
      // Before the pool ends (t.after), which waits for every client to come back.
      client.release();
    }
  });

  it('commits the row with the mark, skips the duplicate, and rolls back both when the handler fails', async (t) => {
    const pool = await freshSchema(t);
    await migrate({ pool });
    const repository = await PostgresRepository.open({ pool });
    t.after(() => repository.close());
    const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'message' });
    const payment: Payment = { id: 'pay-1', amount: 1250 };

    await assert.rejects(
      consumer.process(payment, async (message, context) => {
        await applyPayment(context, message);
        throw new Error('the handler fails after its INSERT');
      }),
      /the handler fails after its INSERT/,
    );
    assert.deepEqual(await rows(pool), [], 'the row rolled back');
    assert.equal(await repository.get('pay-1'), undefined, 'and the claim with it');

    const first = await consumer.process(payment, (message, context) => applyPayment(context, message));
    assert.equal(first.outcome, 'processed');
    assert.equal((await repository.get('pay-1'))?.state, 'confirmed');
    const again = await consumer.process(payment, (message, context) => applyPayment(context, message));
    assert.equal(again.outcome, 'duplicate');
    assert.deepEqual(await rows(pool), [{ message_id: 'pay-1', amount: '1250' }]);
  });
});
