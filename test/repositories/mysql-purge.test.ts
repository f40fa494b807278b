/**
 * purge() deletes only the rows past their forget_at (never a live or a claimed-and-retained one), in bounded
 * batches, across namespaces; the background purge runs on its interval and stops with close().
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError } from '../../src/errors.js';
import { MySqlRepository } from '../../src/repositories/mysql/index.js';
import { createTestTable, testPool, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;

describe('mysql purge', { skip: skipUnlessEnabled('mysql') }, () => {
  const table = testTable('purge');
  let drop: (() => Promise<void>) | undefined;
  const pool = testPool(1);
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await pool.end();
    await drop?.();
  });

  async function open(t: TestContext, extra: { purgeIntervalMs?: number } = {}): Promise<MySqlRepository> {
    const repository = await MySqlRepository.open({
      url: endpoints.mysqlUrl,
      table,
      namespace: `purge-${randomUUID().slice(0, 8)}`,
      ...extra,
    });
    t.after(() => repository.close());
    return repository;
  }

  async function rows(): Promise<number> {
    const [result] = await pool.query(`SELECT COUNT(*) AS n FROM \`${table}\``);
    return Number((result as { n: unknown }[])[0]?.n);
  }

  it('deletes only expired rows, in batches of batchSize, and answers how many', async (t) => {
    await pool.query(`DELETE FROM \`${table}\``);
    const repository = await open(t);
    const other = await open(t);
    const expired = Array.from({ length: 25 }, () => ({ id: randomUUID() }));
    const live = Array.from({ length: 10 }, () => ({ id: randomUUID() }));
    await repository.addMany(expired.slice(0, 15), { ttlMs: 200 });
    // Another namespace's expired rows are purged too: purge() collects the whole table.
    await other.addMany(expired.slice(15), { ttlMs: 200 });
    await repository.addMany(live, { ttlMs: MINUTE });
    // A lapsed claim is kept until its retention ends: its owner may still confirm it.
    const lapsed = randomUUID();
    await repository.add(lapsed, { ttlMs: MINUTE, leaseMs: 100, owner: 'slow' });
    await sleep(400);
    assert.equal(await rows(), 36);
    // Bounded: two statements of 10 rows, then stop, even though 5 more are due.
    assert.equal(await repository.purge({ batchSize: 10, maxBatches: 2 }), 20);
    assert.equal(await rows(), 16);
    assert.equal(await repository.purge({ batchSize: 10 }), 5);
    assert.equal(await repository.purge(), 0);
    assert.equal(await rows(), 11);
    assert.deepEqual(
      await repository.containsMany(live.map((e) => e.id)),
      live.map(() => true),
    );
    assert.equal(await repository.confirm({ id: lapsed, owner: 'slow' }, { ttlMs: MINUTE }), true);
  });

  it('an event-time record is kept for its minimum lifetime on the server clock, whatever its stream time', async (t) => {
    const repository = await open(t);
    const id = randomUUID();
    // Stream time a year ago: by that time the record expired long ago, but the store keeps it a minute.
    await repository.add(id, { ttlMs: 1_000, now: Date.now() - 365 * 86_400_000, minLifetimeMs: MINUTE });
    await repository.purge();
    const [result] = await pool.execute(`SELECT COUNT(*) AS n FROM \`${table}\` WHERE id = ?`, [
      Buffer.from(id),
    ]);
    assert.equal(Number((result as { n: unknown }[])[0]?.n), 1);
  });

  it('refuses a batch size that is not a whole number above 0', async (t) => {
    const repository = await open(t);
    await assert.rejects(repository.purge({ batchSize: 0 }), ConfigError);
    await assert.rejects(repository.purge({ batchSize: 1.5 }), /whole number above 0/);
  });

  it('the background purge runs every purgeIntervalMs and stops with close()', async (t) => {
    const repository = await open(t, { purgeIntervalMs: 200 });
    const ids = Array.from({ length: 5 }, () => ({ id: randomUUID() }));
    await repository.addMany(ids, { ttlMs: 100 });
    const count = async () => {
      const [result] = await pool.execute(
        `SELECT COUNT(*) AS n FROM \`${table}\` WHERE id IN (${ids.map(() => '?').join(', ')})`,
        ids.map((e) => Buffer.from(e.id)),
      );
      return Number((result as { n: unknown }[])[0]?.n);
    };
    assert.equal(await count(), 5);
    const deadline = Date.now() + 5_000;
    while ((await count()) > 0 && Date.now() < deadline) await sleep(100);
    assert.equal(await count(), 0, 'the background purge did not delete the expired rows');
    await repository.close();
    const later = Array.from({ length: 3 }, () => ({ id: randomUUID() }));
    const writer = await open(t);
    await writer.addMany(later, { ttlMs: 50 });
    await sleep(600);
    const [result] = await pool.execute(
      `SELECT COUNT(*) AS n FROM \`${table}\` WHERE id IN (?, ?, ?)`,
      later.map((e) => Buffer.from(e.id)),
    );
    assert.equal(Number((result as { n: unknown }[])[0]?.n), 3, 'a closed repository still purged');
  });
});
