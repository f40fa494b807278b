/**
 * Batches larger than one script call (1000 keys) on Redis: the claim and confirm scripts answer only the keys that
 * did not go the common way, by their index inside the call, so every answer must land at its position in the
 * whole batch, whichever call covered it. Live records, a lapsed lease taken over, and refused confirms are placed
 * in the first, second and third calls of a 2,500-id batch. The claim script's Redis 6 branch runs here too.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { CLAIM_LUA } from '../../src/repositories/redis/scripts.js';
import { decodeRecord } from '../../src/store/record.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const HOUR = 3_600_000;
/** Positions spread over the three script calls of a 2,500-id batch, edges included. */
const LIVE = [0, 999, 1000, 1777, 2499];
const LAPSED = [1, 1001, 2498];

async function open(t: TestContext): Promise<RedisRepository> {
  const repo = await RedisRepository.open({
    url: endpoints.redisUrl,
    keyPrefix: `idem-test:batch-${randomUUID().slice(0, 8)}:`,
  });
  t.after(async () => {
    await repo.clear();
    await repo.close();
  });
  return repo;
}

describe('redis batches spanning several script calls', { skip: skipUnlessEnabled('redis') }, () => {
  it('claims, marks and confirms answer at each id position across calls', async (t) => {
    const repo = await open(t);
    const ids = Array.from({ length: 2_500 }, (_, i) => `id-${i}-${randomUUID()}`);
    const at = (positions: number[]) => positions.map((p) => ids[p] as string);
    await repo.addMany(
      at(LIVE).map((id) => ({ id })),
      { ttlMs: HOUR, leaseMs: HOUR, owner: 'other' },
    );
    await repo.addMany(
      at(LAPSED).map((id) => ({ id })),
      { ttlMs: HOUR, leaseMs: 20, owner: 'crashed' },
    );
    await sleep(60);

    const claims = await repo.addMany(
      ids.map((id) => ({ id })),
      { ttlMs: HOUR, leaseMs: HOUR, owner: 'me' },
    );
    const refused = claims.flatMap((r, i) => (r.added ? [] : [i]));
    assert.deepEqual(refused, LIVE);
    for (const p of LIVE) {
      const r = claims[p];
      assert.equal(r && !r.added && r.existing.owner, 'other', `position ${p}`);
    }
    for (const p of LAPSED) assert.equal((await repo.get(ids[p] as string))?.owner, 'me', `position ${p}`);

    const confirmed = await repo.confirmMany(
      ids.map((id) => ({ id, owner: 'me' })),
      { ttlMs: HOUR },
    );
    assert.deepEqual(
      confirmed.flatMap((ok, i) => (ok ? [] : [i])),
      LIVE,
    );

    const fresh = Array.from({ length: 2_500 }, (_, i) => `mark-${i}-${randomUUID()}`);
    for (const p of LIVE) fresh[p] = ids[p] as string;
    const marked = await repo.markMany(
      fresh.map((id) => ({ id })),
      { ttlMs: HOUR },
    );
    assert.deepEqual(
      marked.flatMap((ok, i) => (ok ? [] : [i])),
      LIVE,
    );
  });

  it("the claim script's Redis 6 branch (SET NX PX, then GET) keeps live records, takes over lapsed ones", async (t) => {
    const repo = await open(t);
    const redis6 = CLAIM_LUA.replace('redis.REDIS_VERSION_NUM ~= nil', 'false');
    assert.notEqual(redis6, CLAIM_LUA);
    const ids = ['live', 'lapsed', 'fresh'].map((name) => `${name}-${randomUUID()}`);
    const keys = ids.map((id) => repo.redisKey(id));
    await repo.add(ids[0] as string, { ttlMs: HOUR, leaseMs: HOUR, owner: 'other' });
    // A lapsed claim: in flight, its lease long over, still kept by PX for the retention time.
    await repo.client.set(keys[1] as string, 'f\u00011\u00011\u0001crashed\u0001\u0001', 'PX', HOUR);
    // ARGV: now ('' = server time), PX, ttlMs, leaseMs, owner, the shared record tail.
    const reply = (await repo.client.eval(
      redis6,
      3,
      ...keys,
      '',
      HOUR,
      HOUR,
      HOUR,
      'me',
      '\u0001',
    )) as unknown[];
    assert.equal(reply.length, 3, 'only the live key is answered, with its record');
    assert.equal(reply[1], 1);
    assert.equal(decodeRecord('', String(reply[2])).owner, 'other');
    for (const id of ids.slice(1)) assert.equal((await repo.get(id))?.owner, 'me', id);
  });
});
