import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { IdempotentConsumer } from '../../src/consumer/idempotent-consumer.js';
import { ConfigError, InProgressError, StoredFailureError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { migrate, PostgresRepository, postgresTransaction } from '../../src/repositories/postgres/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/*
 * The consumer's `transaction` option against the real PostgreSQL: the side effect is a row in `effects`
 * written through context.transaction, and the mark commits with it or not at all.
 */

interface Msg {
  readonly id: string;
  readonly amount?: number;
  readonly fail?: boolean;
}

const TABLE = 'idem_test_tx';

describe('consumer transaction (postgres)', { skip: skipUnlessEnabled('postgres') }, () => {
  let pool: pg.Pool;
  const effects = `effects_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const repositories: PostgresRepository[] = [];

  before(async () => {
    pool = new pg.Pool({ connectionString: endpoints.postgresUrl, max: 8 });
    await migrate({ url: endpoints.postgresUrl, table: TABLE });
    // No unique constraint: a repeated effect shows as a second row.
    await pool.query(`CREATE TABLE ${effects} (message_id text NOT NULL, amount int)`);
  });
  after(async () => {
    for (const r of repositories) await r.close().catch(() => undefined);
    await pool.query(`DROP TABLE IF EXISTS ${effects}`);
    await pool.end();
  });

  /** A repository in its own namespace (one per test, so ids never meet). */
  async function open(
    namespace: string,
    extra: { lockTimeoutMs?: number } = {},
  ): Promise<PostgresRepository> {
    const repository = await PostgresRepository.open({
      url: endpoints.postgresUrl,
      table: TABLE,
      namespace,
      ...extra,
    });
    repositories.push(repository);
    return repository;
  }

  /** The handler of every test: one row per run, through the transaction; `fail` throws after writing. */
  async function write(message: Msg, context: { transaction?: unknown }): Promise<string> {
    const db = postgresTransaction(context);
    await db.query(`INSERT INTO ${effects} (message_id, amount) VALUES ($1, $2)`, [
      message.id,
      message.amount ?? 1,
    ]);
    if (message.fail) throw new Error(`handler failed for ${message.id}`);
    return `done ${message.id}`;
  }

  async function rows(id: string): Promise<number> {
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${effects} WHERE message_id = $1`, [
      id,
    ]);
    return rows[0].n as number;
  }

  const newId = (label: string) => `${label}-${randomUUID()}`;

  it('is on by default with a transactional repository; the effect and the mark commit together', async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id' });
    assert.equal(consumer.options.transaction, 'message');
    const id = newId('pay');
    const first = await consumer.process({ id }, write);
    assert.equal(first.outcome, 'processed');
    assert.equal(await rows(id), 1);
    assert.equal((await repository.get(id))?.state, 'confirmed');
    const again = await consumer.process({ id }, write);
    assert.equal(again.outcome, 'duplicate');
    assert.equal(await rows(id), 1);
  });

  it('a failed handler rolls back its effect and its claim; the retry runs once', async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id' });
    const id = newId('pay');
    await assert.rejects(consumer.process({ id, fail: true }, write), /handler failed/);
    assert.equal(await rows(id), 0, 'the failed handler’s row was committed');
    assert.equal(await repository.get(id), undefined, 'the failed handler’s claim was committed');
    assert.equal((await consumer.process({ id }, write)).outcome, 'processed');
    assert.equal(await rows(id), 1);
  });

  it('a failure the handler caused in SQL (a constraint) is rethrown, not a store error', async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id' });
    const id = newId('bad');
    const failing = async (_m: Msg, context: { transaction?: unknown }) => {
      await postgresTransaction(context).query('SELECT 1/0');
    };
    await assert.rejects(consumer.process({ id }, failing), /division by zero/);
    assert.equal(await repository.get(id), undefined);
  });

  it('removeOnFailure: false keeps the failure but undoes the effect (savepoint)', async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', removeOnFailure: false });
    const id = newId('pay');
    await assert.rejects(consumer.process({ id, fail: true }, write), /handler failed/);
    assert.equal(await rows(id), 0, 'the failed handler’s row was committed');
    assert.equal((await repository.get(id))?.state, 'confirmed', 'the kept failure was not committed');
    await assert.rejects(consumer.process({ id }, write), StoredFailureError);
    assert.equal(await rows(id), 0);
  });

  it('stored results commit with the effect and replay', async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', storeResult: true });
    const id = newId('pay');
    assert.equal((await consumer.process({ id }, write)).result, `done ${id}`);
    const again = await consumer.process({ id }, write);
    assert.equal(again.outcome, 'duplicate');
    assert.equal(again.replayed, true);
    assert.equal(again.result, `done ${id}`);
    assert.equal(await rows(id), 1);
  });

  it('a concurrent delivery waits on the open claim and is a duplicate once it commits', async () => {
    const namespace = newId('ns');
    const a = new IdempotentConsumer<Msg>({ repository: await open(namespace), id: 'id' });
    const b = new IdempotentConsumer<Msg>({ repository: await open(namespace), id: 'id' });
    const id = newId('pay');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started!: () => void;
    const inHandler = new Promise<void>((resolve) => {
      started = resolve;
    });
    const first = a.process({ id }, async (m, context) => {
      const value = await write(m, context);
      started();
      await gate;
      return value;
    });
    await inHandler;
    let bRan = false;
    const second = b.process({ id }, async (m, context) => {
      bRan = true;
      return write(m, context);
    });
    // b is now blocked on the row lock; let a commit.
    setTimeout(release, 300);
    assert.equal((await first).outcome, 'processed');
    assert.equal((await second).outcome, 'duplicate');
    assert.equal(bRan, false);
    assert.equal(await rows(id), 1);
  });

  it('a concurrent delivery that waits past lockTimeoutMs is in-progress, and commits nothing', async () => {
    const namespace = newId('ns');
    const a = new IdempotentConsumer<Msg>({ repository: await open(namespace), id: 'id' });
    const b = new IdempotentConsumer<Msg>({
      repository: await open(namespace),
      id: 'id',
      lockTimeoutMs: 200,
    });
    const id = newId('pay');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started!: () => void;
    const inHandler = new Promise<void>((resolve) => {
      started = resolve;
    });
    const first = a.process({ id }, async (m, context) => {
      const value = await write(m, context);
      started();
      await gate;
      return value;
    });
    await inHandler;
    await assert.rejects(b.process({ id }, write), (error: unknown) => error instanceof InProgressError);
    const batch = await b.processBatch([{ id }], write);
    assert.equal(batch.results[0]?.outcome, 'in-progress');
    release();
    assert.equal((await first).outcome, 'processed');
    assert.equal(await rows(id), 1);
    assert.equal((await b.process({ id }, write)).outcome, 'duplicate');
  });

  it('when the claiming transaction rolls back, the waiting delivery claims the id and runs', async () => {
    const namespace = newId('ns');
    const a = new IdempotentConsumer<Msg>({ repository: await open(namespace), id: 'id' });
    const b = new IdempotentConsumer<Msg>({ repository: await open(namespace), id: 'id' });
    const id = newId('pay');
    let started!: () => void;
    const inHandler = new Promise<void>((resolve) => {
      started = resolve;
    });
    const first = a.process({ id }, async (m, context) => {
      await write(m, context);
      started();
      await new Promise((resolve) => setTimeout(resolve, 300));
      throw new Error('first delivery failed');
    });
    await inHandler;
    const second = b.process({ id }, write);
    await assert.rejects(first, /first delivery failed/);
    assert.equal((await second).outcome, 'processed');
    assert.equal(await rows(id), 1);
  });

  it('lazy mode: two deliveries that both pass the check commit one effect (the raced one reruns)', async () => {
    const namespace = newId('ns');
    const a = new IdempotentConsumer<Msg>({ repository: await open(namespace), id: 'id', mode: 'lazy' });
    const b = new IdempotentConsumer<Msg>({ repository: await open(namespace), id: 'id', mode: 'lazy' });
    const id = newId('pay');
    // Both handlers run before either marks: each waits until the other has started.
    let arrived = 0;
    let bothIn!: () => void;
    const barrier = new Promise<void>((resolve) => {
      bothIn = resolve;
    });
    let runs = 0;
    const handler = async (m: Msg, context: { transaction?: unknown }) => {
      runs++;
      const value = await write(m, context);
      if (++arrived === 2) bothIn();
      await Promise.race([barrier, new Promise((resolve) => setTimeout(resolve, 2_000))]);
      return value;
    };
    const [ra, rb] = await Promise.all([a.process({ id }, handler), b.process({ id }, handler)]);
    assert.equal(runs, 2, 'both deliveries should have passed the check');
    assert.deepEqual([ra.outcome, rb.outcome].sort(), ['duplicate', 'processed']);
    assert.equal(await rows(id), 1, 'the raced delivery’s effect was committed');
  });

  it("processBatch, transaction 'message': one transaction per message, failures undo only their own", async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id' });
    const [x, y, z] = [newId('x'), newId('y'), newId('z')];
    const { results } = await consumer.processBatch(
      [{ id: x }, { id: y, fail: true }, { id: x }, { id: z }],
      write,
    );
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'failed', 'duplicate', 'processed'],
    );
    assert.deepEqual([await rows(x), await rows(y), await rows(z)], [1, 0, 1]);
    assert.equal(await repository.get(y), undefined);
  });

  it("processBatch, transaction 'batch': one transaction, a failed handler undoes only its own writes", async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', transaction: 'batch' });
    const [x, y, z] = [newId('x'), newId('y'), newId('z')];
    const seen = new Set<unknown>();
    const { results } = await consumer.processBatch(
      [{ id: x }, { id: y, fail: true }, { id: x }, { id: z }],
      async (m, context) => {
        seen.add(context.transaction);
        return write(m, context);
      },
    );
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'failed', 'duplicate', 'processed'],
    );
    assert.equal(seen.size, 1, 'the handlers of one batch ran on different transactions');
    assert.deepEqual([await rows(x), await rows(y), await rows(z)], [1, 0, 1]);
    assert.equal(await repository.get(y), undefined);
    assert.equal((await repository.get(z))?.state, 'confirmed');
  });

  it('a whole-batch handler gets the transaction on every item; when it throws nothing commits', async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id' });
    const [x, y] = [newId('x'), newId('y')];
    const failing = {
      batch: async (items: readonly { message: Msg; context: { transaction?: unknown } }[]) => {
        for (const item of items) await write(item.message, item.context);
        throw new Error('batch handler failed');
      },
    };
    const failed = await consumer.processBatch([{ id: x }, { id: y }], failing);
    assert.deepEqual(
      failed.results.map((r) => r.outcome),
      ['failed', 'failed'],
    );
    assert.deepEqual([await rows(x), await rows(y)], [0, 0]);
    const ok = await consumer.processBatch([{ id: x }, { id: y }], {
      batch: async (items) => {
        for (const item of items) await write(item.message, item.context);
      },
    });
    assert.deepEqual(
      ok.results.map((r) => r.outcome),
      ['processed', 'processed'],
    );
    assert.deepEqual([await rows(x), await rows(y)], [1, 1]);
  });

  it('transaction: false commits the marks on their own (no context.transaction)', async () => {
    const repository = await open(newId('ns'));
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', transaction: false });
    const id = newId('plain');
    const result = await consumer.process({ id }, async (_m, context) => context.transaction);
    assert.equal(result.result, undefined);
    assert.equal((await repository.get(id))?.state, 'confirmed');
    assert.throws(() => postgresTransaction({}), /transaction/);
  });

  it('refuses a transaction with a plain store, with storeFailure "process" and with eventTime', async () => {
    const repository = await open(newId('ns'));
    assert.throws(
      () =>
        new IdempotentConsumer<Msg>({ repository: new MemoryRepository(), id: 'id', transaction: 'message' }),
      (error: unknown) => error instanceof ConfigError && /transaction/.test(error.message),
    );
    assert.throws(
      () =>
        new IdempotentConsumer<Msg>({ repository, id: 'id', transaction: 'batch', storeFailure: 'process' }),
      (error: unknown) => error instanceof ConfigError && /storeFailure/.test(error.message),
    );
    assert.throws(
      () =>
        new IdempotentConsumer<Msg>({
          repository,
          id: 'id',
          transaction: 'message',
          eventTime: { intervalMs: 1000 },
        }),
      (error: unknown) => error instanceof ConfigError && /transaction/.test(error.message),
    );
    // Set nothing: event-time mode and fail-open run without a transaction, and say so in the options.
    assert.equal(
      new IdempotentConsumer<Msg>({ repository, id: 'id', storeFailure: 'process' }).options.transaction,
      false,
    );
    assert.equal(
      new IdempotentConsumer<Msg>({ repository: new MemoryRepository(), id: 'id' }).options.transaction,
      false,
    );
  });
});
