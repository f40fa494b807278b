/**
 * Leases and TTLs on MySQL are judged by the server's clock (`@@timestamp`), not by each worker's: workers whose
 * clocks disagree (an injected clock) still agree on every claim, and a server whose clock is an hour ahead
 * writes records an hour ahead. An explicit `now` (event-time mode) is the only other time a statement uses.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPool } from 'mysql2/promise';
import { MySqlRepository } from '../../src/repositories/mysql/index.js';
import { createTestTable, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;
const HOUR = 3_600_000;

describe('mysql server clock', { skip: skipUnlessEnabled('mysql') }, () => {
  const table = testTable('clock');
  let drop: (() => Promise<void>) | undefined;
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await drop?.();
  });

  /** A repository on the stack's server whose worker clock is off by `skewMs`. */
  async function worker(t: TestContext, namespace: string, skewMs = 0): Promise<MySqlRepository> {
    const repository = await MySqlRepository.open({
      url: endpoints.mysqlUrl,
      table,
      namespace,
      clock: () => Date.now() + skewMs,
    });
    t.after(() => repository.close());
    return repository;
  }

  it('a worker whose clock is 61 s ahead does not take over a live 60 s claim', async (t) => {
    const namespace = `clock-${randomUUID().slice(0, 8)}`;
    const honest = await worker(t, namespace);
    const ahead = await worker(t, namespace, 61_000);
    const [id, ...ids] = [randomUUID(), randomUUID(), randomUUID()];
    assert.equal(
      (await honest.add(id as string, { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'honest' })).added,
      true,
    );
    await honest.addMany(
      ids.map((i) => ({ id: i })),
      { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'honest' },
    );
    const taken = await ahead.add(id as string, { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'ahead' });
    assert.equal(taken.added, false, 'a worker 61 s ahead took over a live claim');
    assert.equal(!taken.added && taken.existing.owner, 'honest');
    const batch = await ahead.addMany(
      ids.map((i) => ({ id: i })),
      { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'ahead' },
    );
    assert.deepEqual(
      batch.map((r) => r.added),
      [false, false],
    );
    assert.deepEqual(await ahead.containsMany(ids), [true, true]);
    assert.equal(await honest.confirm({ id: id as string, owner: 'honest' }, { ttlMs: MINUTE }), true);
  });

  it('a worker whose clock is 61 s behind sees a confirmed id expire with everyone else', async (t) => {
    const namespace = `clock-${randomUUID().slice(0, 8)}`;
    const honest = await worker(t, namespace);
    const behind = await worker(t, namespace, -61_000);
    await behind.contains('warm-up');
    const id = randomUUID();
    const written = await behind.add(id, { ttlMs: 1_200 });
    assert.ok(written.added);
    assert.ok(
      Math.abs(written.record.expiresAt - (Date.now() + 1_200)) < 30_000,
      'expiresAt from the worker clock',
    );
    assert.equal(await honest.contains(id), true);
    await sleep(1_500);
    assert.equal(await behind.contains(id), false, 'a worker 61 s behind still holds an expired id');
    assert.deepEqual(await behind.getMany([id]), [undefined]);
    assert.equal((await behind.add(id, { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'behind' })).added, true);
  });

  it("records carry the server's time: a session whose clock is an hour ahead writes them an hour ahead", async (t) => {
    // `SET timestamp` moves NOW() and @@timestamp for that session only: a server clock an hour off, seen by
    // this pool alone. The worker's own clock stays right.
    const skewed = createPool({ uri: endpoints.mysqlUrl, connectionLimit: 1 });
    skewed.pool.on('connection', (connection) => {
      connection.query('SET timestamp = UNIX_TIMESTAMP() + 3600', () => {});
    });
    t.after(() => skewed.end());
    const repository = await MySqlRepository.open({
      pool: skewed,
      table,
      namespace: `clock-${randomUUID()}`,
    });
    t.after(() => repository.close());
    const [single, batched] = [randomUUID(), randomUUID()];
    const one = await repository.add(single, { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'o' });
    const many = await repository.addMany([{ id: batched }, { id: randomUUID() }], { ttlMs: MINUTE });
    for (const answer of [one, ...many]) {
      assert.ok(answer.added);
      const offset = answer.record.expiresAt - MINUTE - Date.now();
      assert.ok(
        Math.abs(offset - HOUR) < 30_000,
        `expiresAt is ${offset} ms off the worker clock, not an hour`,
      );
    }
    const stored = await repository.get(single);
    assert.deepEqual(stored, one.added ? one.record : undefined);
    // Judged on that clock too: a claim with a lease of a minute is live in an hour's skew.
    assert.equal(await repository.contains(single), true);
  });

  it('an explicit now (event-time mode) is the time liveness is judged by', async (t) => {
    const repository = await worker(t, `clock-${randomUUID().slice(0, 8)}`);
    const id = randomUUID();
    const streamTime = 1_700_000_000_000;
    const written = await repository.add(id, { ttlMs: MINUTE, now: streamTime, minLifetimeMs: HOUR });
    assert.ok(written.added);
    assert.equal(written.record.expiresAt, streamTime + MINUTE);
    assert.equal(await repository.contains(id, { now: streamTime + MINUTE - 1 }), true);
    assert.equal(await repository.contains(id, { now: streamTime + MINUTE }), false);
    // On the server's clock (years later) the record expired long ago.
    assert.equal(await repository.contains(id), false);
    const again = await repository.add(id, { ttlMs: MINUTE, now: streamTime + 1_000 });
    assert.equal(again.added, false);
  });
});
