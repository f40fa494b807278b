/**
 * Leases and TTLs on PostgreSQL are judged by the server's clock (`statement_timestamp()`), not by each worker's:
 * workers whose clocks disagree (simulated with an injected clock) still agree on every claim. An explicit `now`
 * (event-time mode) is the only other time a statement uses.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { PostgresRepository } from '../../src/repositories/postgres/index.js';
import { createTestTable, testPool, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;

describe('postgres server clock', { skip: skipUnlessEnabled('postgres') }, () => {
  const table = testTable('clock');
  let drop: (() => Promise<void>) | undefined;
  const pool = testPool(1);
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await pool.end();
    await drop?.();
  });

  async function worker(t: TestContext, namespace: string, skewMs: number): Promise<PostgresRepository> {
    const repository = await PostgresRepository.open({
      url: endpoints.postgresUrl,
      table,
      namespace,
      clock: () => Date.now() + skewMs,
    });
    t.after(() => repository.close());
    return repository;
  }

  async function serverNow(): Promise<number> {
    const { rows } = await pool.query(
      'SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now',
    );
    return rows[0].now as number;
  }

  it('a worker whose clock is 61 s ahead does not take over a live 60 s claim, and reads agree', async (t) => {
    const namespace = `clock-${randomUUID().slice(0, 8)}`;
    const honest = await worker(t, namespace, 0);
    const ahead = await worker(t, namespace, 61_000);
    const id = randomUUID();
    const ids = [randomUUID(), randomUUID()];
    assert.equal((await honest.add(id, { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'honest' })).added, true);
    await honest.addMany(
      ids.map((i) => ({ id: i })),
      { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'honest' },
    );
    const taken = await ahead.add(id, { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'ahead' });
    assert.equal(taken.added, false, 'a worker 61 s ahead took over a live claim');
    assert.deepEqual(
      (
        await ahead.addMany(
          ids.map((i) => ({ id: i })),
          { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'ahead' },
        )
      ).map((r) => r.added),
      [false, false],
    );
    assert.equal(await ahead.contains(id), true);
    assert.deepEqual(await ahead.containsMany(ids), [true, true]);
    assert.equal((await ahead.get(id))?.owner, 'honest');
    assert.deepEqual(await ahead.markMany([{ id }], { ttlMs: MINUTE }), [false]);
  });

  it("records carry the server's time, whatever the worker's clock says", async (t) => {
    const behind = await worker(t, `clock-${randomUUID().slice(0, 8)}`, -3_600_000);
    const before = await serverNow();
    const added = await behind.add(randomUUID(), { ttlMs: MINUTE, leaseMs: 30_000, owner: 'o' });
    const confirmedId = randomUUID();
    await behind.add(confirmedId, { ttlMs: MINUTE, leaseMs: 30_000, owner: 'o' });
    await behind.confirm({ id: confirmedId, owner: 'o' }, { ttlMs: 2 * MINUTE });
    const afterNow = await serverNow();
    assert.ok(added.added);
    const { expiresAt, leaseExpiresAt } = added.record;
    assert.ok(expiresAt >= before + MINUTE && expiresAt <= afterNow + MINUTE, `expiresAt ${expiresAt}`);
    assert.equal(leaseExpiresAt, expiresAt - 30_000);
    const confirmed = await behind.get(confirmedId);
    assert.ok(
      confirmed && confirmed.expiresAt >= before + 2 * MINUTE && confirmed.expiresAt <= afterNow + 2 * MINUTE,
    );
  });

  it('an explicit now (event-time mode) is the time claims and reads judge by', async (t) => {
    const repository = await worker(t, `clock-${randomUUID().slice(0, 8)}`, 0);
    const id = randomUUID();
    const streamTime = 1_000_000;
    const claim = await repository.add(id, { ttlMs: 500, now: streamTime, minLifetimeMs: MINUTE });
    assert.ok(claim.added);
    assert.equal(claim.record.expiresAt, streamTime + 500);
    assert.equal(await repository.contains(id, { now: streamTime + 499 }), true);
    assert.equal(await repository.contains(id, { now: streamTime + 500 }), false);
    assert.equal((await repository.get(id, { now: streamTime + 100 }))?.expiresAt, streamTime + 500);
    // Stream time past the record's end: the id is free again for that stream.
    assert.equal((await repository.add(id, { ttlMs: 500, now: streamTime + 600 })).added, true);
    // On the server's clock, stream time 1970 is long gone.
    assert.equal(await repository.contains(id), false);
  });
});
