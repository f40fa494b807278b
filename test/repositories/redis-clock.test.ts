/**
 * Leases and TTLs on Redis are judged by the server's clock, not by each worker's: workers whose clocks disagree
 * (here simulated with an injected clock) still agree on every claim. An explicit `now` (event-time mode) is the
 * only other time a script uses.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;

/** A repository on the stack's server whose worker clock is off by `skewMs`, cleared and closed after the test. */
async function worker(t: TestContext, keyPrefix: string, skewMs = 0): Promise<RedisRepository> {
  const repo = await RedisRepository.open({
    url: endpoints.redisUrl,
    keyPrefix,
    clock: () => Date.now() + skewMs,
  });
  t.after(async () => {
    await repo.clear();
    await repo.close();
  });
  return repo;
}

describe('redis server clock', { skip: skipUnlessEnabled('redis') }, () => {
  it('a worker whose clock is 61 s ahead does not take over a live 60 s claim', async (t) => {
    const prefix = `idem-test:clock-${randomUUID().slice(0, 8)}:`;
    const honest = await worker(t, prefix);
    const ahead = await worker(t, prefix, 61_000);
    const id = randomUUID();
    const ids = [randomUUID(), randomUUID()];
    assert.equal((await honest.add(id, { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'honest' })).added, true);
    await honest.addMany(
      ids.map((i) => ({ id: i })),
      { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'honest' },
    );

    const taken = await ahead.add(id, { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'ahead' });
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
    // Reads agree with the claims: the claim is live for every worker.
    assert.equal(await ahead.contains(id), true);
    assert.deepEqual(await ahead.containsMany(ids), [true, true]);
    assert.equal((await ahead.get(id))?.owner, 'honest');
    assert.equal(await honest.confirm({ id, owner: 'honest' }, { ttlMs: MINUTE }), true);
  });

  it('a worker whose clock is 61 s behind sees a confirmed id expire with everyone else', async (t) => {
    const prefix = `idem-test:clock-${randomUUID().slice(0, 8)}:`;
    const honest = await worker(t, prefix);
    const behind = await worker(t, prefix, -61_000);
    await behind.contains('warm-up');
    const id = randomUUID();
    const written = await behind.add(id, { ttlMs: 1_200 });
    assert.ok(written.added);
    // The record's times come from the server too: not a minute off like the worker's clock.
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

  it('an explicit now (event-time mode) is still the time liveness is judged by', async (t) => {
    const prefix = `idem-test:clock-${randomUUID().slice(0, 8)}:`;
    const skewed = await worker(t, prefix, 3_600_000);
    const streamTime = 1_600_000_000_000;
    const id = randomUUID();
    const added = await skewed.add(id, { ttlMs: 10_000, now: streamTime });
    assert.equal(added.added && added.record.expiresAt, streamTime + 10_000);
    assert.equal(await skewed.contains(id, { now: streamTime + 9_999 }), true);
    assert.equal(await skewed.contains(id, { now: streamTime + 10_000 }), false);
    // Judged by the server's clock, a record that expired in 2020 stream time is gone.
    assert.equal(await skewed.contains(id), false);
    assert.equal((await skewed.add(id, { ttlMs: 10_000, now: streamTime + 5_000 })).added, false);
  });
});
