import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { claimedNotOnce, runRace } from '../helpers/race.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

describe('redis cross-process race', { skip: skipUnlessEnabled('redis') }, () => {
  it('4 processes claiming the same 10,000 ids in batches: each id is claimed exactly once', async (t) => {
    const keyPrefix = `idem-test:race-${randomUUID().slice(0, 8)}:`;
    const cleanup = await RedisRepository.open({ url: endpoints.redisUrl, keyPrefix });
    t.after(async () => {
      await cleanup.clear();
      await cleanup.close();
    });
    const ids = Array.from({ length: 10_000 }, (_, i) => `order-${i}`);

    const result = await runRace({
      store: 'redis',
      options: { url: endpoints.redisUrl, keyPrefix },
      ids,
      workers: 4,
      batchSize: 500,
      mode: 'eager',
      confirm: true,
      timeoutMs: 120_000,
    });

    assert.deepEqual(claimedNotOnce(result), [], 'ids claimed by no worker or by several');
    assert.equal(
      result.workers.reduce((n, w) => n + w.won.length, 0),
      ids.length,
    );
    for (const worker of result.workers) assert.deepEqual(worker.unconfirmed, [], worker.owner);
    // Every record is now the winner's confirmed one.
    const records = await Promise.all(ids.slice(0, 100).map((id) => cleanup.get(id)));
    assert.ok(records.every((r) => r?.state === 'confirmed'));
  });
});

describe('cross-process race harness', () => {
  it('catches a store that is not shared: in-process memory stores let every worker win', async () => {
    const ids = Array.from({ length: 1_000 }, (_, i) => `id-${i}`);
    const result = await runRace({ store: 'memory', options: {}, ids, workers: 2, batchSize: 100 });
    const counts = claimedNotOnce(result);
    assert.equal(counts.length, ids.length);
    assert.ok(counts.every(([, n]) => n === 2));
  });
});
