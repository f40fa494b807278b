/**
 * PostgreSQL has no TTL: `purge()` deletes the rows past `forget_at` (the later of retention end, lease end and
 * minimum lifetime), in bounded batches, and nothing else; rows another transaction holds are skipped, not
 * waited for. The background purge does the same on a timer that close() stops.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { PostgresRepository, postgresTransaction } from '../../src/repositories/postgres/index.js';
import { statements } from '../../src/repositories/postgres/sql.js';
import { createTestTable, testPool, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;

describe('postgres purge', { skip: skipUnlessEnabled('postgres') }, () => {
  // A table of its own: purge() spans every namespace of its table.
  const table = testTable('purge');
  let drop: (() => Promise<void>) | undefined;
  const pool = testPool(2);
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await pool.end();
    await drop?.();
  });

  async function open(t: TestContext, extra: { purgeIntervalMs?: number } = {}): Promise<PostgresRepository> {
    const repository = await PostgresRepository.open({
      url: endpoints.postgresUrl,
      table,
      namespace: `purge-${randomUUID().slice(0, 8)}`,
      ...extra,
    });
    t.after(async () => {
      await repository.clear().catch(() => undefined);
      await repository.close();
    });
    return repository;
  }

  async function rowCount(): Promise<number> {
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${table}"`);
    return rows[0].n as number;
  }

  /** Rows whose retention (and lease) ended a moment ago: due for the purge, invisible to every read already. */
  async function expired(repository: PostgresRepository, count: number): Promise<string[]> {
    const ids = Array.from({ length: count }, () => randomUUID());
    await repository.addMany(
      ids.map((id) => ({ id })),
      { ttlMs: 1 },
    );
    await sleep(20);
    const some = ids.slice(0, 3);
    assert.deepEqual(
      await repository.containsMany(some),
      some.map(() => false),
    );
    return ids;
  }

  it('deletes only the rows past forget_at, in batches of batchSize, and answers how many', async (t) => {
    const repository = await open(t);
    const live = Array.from({ length: 5 }, () => randomUUID());
    await repository.addMany(
      live.map((id) => ({ id })),
      { ttlMs: MINUTE },
    );
    // A lapsed claim within its retention: not live, but kept so its slow owner can still confirm it.
    const lapsed = randomUUID();
    await repository.add(lapsed, { ttlMs: MINUTE, leaseMs: 1, owner: 'slow' });
    // Expired by stream time, but kept its minimum lifetime on the server's clock (event-time mode).
    const streamOld = randomUUID();
    await repository.add(streamOld, { ttlMs: 1, now: 1_000, minLifetimeMs: MINUTE });
    await expired(repository, 23);
    assert.equal(await rowCount(), 30);

    assert.equal(await repository.purge({ batchSize: 10, maxBatches: 1 }), 10, 'one bounded batch');
    assert.equal(await rowCount(), 20);
    assert.equal(await repository.purge({ batchSize: 4 }), 13, 'batches until one comes back short');
    assert.equal(await rowCount(), 7);
    assert.equal(await repository.purge(), 0);
    assert.deepEqual(
      await repository.containsMany(live),
      live.map(() => true),
    );
    assert.equal(await repository.confirm({ id: lapsed, owner: 'slow' }, { ttlMs: MINUTE }), true);
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${table}" WHERE id = $1`, [streamOld]);
    assert.equal(rows[0].n, 1);
  });

  it('skips rows another transaction holds instead of waiting for them', async (t) => {
    const repository = await open(t);
    const ids = await expired(repository, 3);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(`SELECT 1 FROM "${table}" WHERE id = $1 FOR UPDATE`, [ids[0]]);
      const started = Date.now();
      assert.equal(await repository.purge(), 2);
      assert.ok(Date.now() - started < 2_000, 'the purge waited for the locked row');
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    assert.equal(await repository.purge(), 1);
  });

  it('the background purge runs every purgeIntervalMs and stops with close()', async (t) => {
    const repository = await open(t, { purgeIntervalMs: 50 });
    await expired(repository, 5);
    for (let i = 0; i < 100 && (await rowCount()) > 0; i++) await sleep(20);
    assert.equal(await rowCount(), 0, 'the background purge did not run');
    await repository.close();
    const other = await open(t);
    await expired(other, 2);
    await sleep(200);
    assert.equal(await rowCount(), 2, 'the closed repository still purges');
  });

  it('refuses a batch size that is not a whole number above 0', async (t) => {
    const repository = await open(t);
    await assert.rejects(repository.purge({ batchSize: 0 }), /batchSize/);
    await assert.rejects(repository.purge({ batchSize: 1.5 }), /batchSize/);
  });

  it('is planned at each run: a table grown after the first purges is not scanned whole', async (t) => {
    // A table of its own, young: the purges of a new deployment's first minute.
    const young = testTable('purge_plan');
    t.after(await createTestTable(young));
    const repository = await PostgresRepository.open({
      url: endpoints.postgresUrl,
      table: young,
      poolSize: 1,
    });
    t.after(() => repository.close());
    // More runs than PostgreSQL makes custom plans for before it would cache a generic one.
    for (let i = 0; i < 8; i++) assert.equal(await repository.purge(), 0);
    const prepared = await repository.transaction((transaction) =>
      postgresTransaction({ transaction: transaction.client }).query<{ statement: string }>(
        'SELECT statement FROM pg_prepared_statements',
      ),
    );
    assert.deepEqual(
      prepared.rows.filter((row) => row.statement.includes('forget_at <=')),
      [],
      'the purge is not a prepared statement with a plan cached on the empty table',
    );
    // The table grows by a burst autoanalyze has not seen yet; a few rows are due.
    await pool.query(
      `INSERT INTO "${young}" (namespace, id, state, expires_at, forget_at)
        SELECT 'grown', 'live-' || g, 'confirmed', 1e13, 1e13 + g FROM generate_series(1, 200000) g`,
    );
    await pool.query(
      `INSERT INTO "${young}" (namespace, id, state, expires_at, forget_at)
        SELECT 'grown', 'due-' || g, 'confirmed', 0, g FROM generate_series(1, 50) g`,
    );
    const client = await pool.connect();
    t.after(() => client.release());
    await client.query('BEGIN');
    const plan = await client.query({
      text: `EXPLAIN (COSTS OFF) ${statements(young).purge.text}`,
      values: [1000],
    });
    await client.query('ROLLBACK');
    const text = plan.rows.map((row) => row['QUERY PLAN'] as string).join('\n');
    assert.match(text, /Index Scan using .*_forget_at/, text);
    assert.match(text, /Tid Scan/, text);
    assert.doesNotMatch(text, /Seq Scan/, text);
    assert.equal(await repository.purge(), 50);
  });
});
