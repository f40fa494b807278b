import assert from 'node:assert/strict';
import {
  type ContractSuite,
  claimBy,
  LONG_TTL_MS,
  repoTest,
  SHORT_TTL_MS,
  sleep,
  uniqueId,
  withinWindow,
} from './context.js';

export function expiryTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('treats a confirmed id as a duplicate until its TTL, then as new', async (repo) => {
    // Warm the connection so a slow first round trip does not eat the TTL window.
    await repo.contains(uniqueId('warm'));
    const { id, again } = await withinWindow(SHORT_TTL_MS, 'add, then add again', async () => {
      const id = uniqueId('ttl');
      assert.equal((await repo.add(id, { ttlMs: SHORT_TTL_MS })).added, true);
      return { id, again: await repo.add(id, { ttlMs: SHORT_TTL_MS }) };
    });
    assert.equal(again.added, false);
    await sleep(SHORT_TTL_MS + 300);
    assert.equal(await repo.contains(id), false, 'expired id still reported by contains');
    assert.equal(await repo.get(id), undefined);
    assert.equal((await repo.add(id, { ttlMs: LONG_TTL_MS })).added, true, 'expired id not claimable again');
  });

  test('frees an unconfirmed claim when its lease ends, and not before', async (repo) => {
    await repo.contains(uniqueId('warm'));
    const { id, blocked } = await withinWindow(SHORT_TTL_MS, 'claim, then claim again', async () => {
      const id = uniqueId('lease');
      const claim = await repo.add(id, claimBy('crashed-worker', SHORT_TTL_MS));
      assert.equal(claim.added, true);
      assert.equal(claim.added && claim.record.state, 'in-flight');
      const blocked = await repo.add(id, { ttlMs: LONG_TTL_MS, leaseMs: SHORT_TTL_MS, owner: 'other' });
      return { id, blocked };
    });
    assert.equal(blocked.added, false);
    assert.equal(!blocked.added && blocked.existing.state, 'in-flight');
    assert.equal(!blocked.added && blocked.existing.owner, 'crashed-worker');
    assert.ok(!blocked.added && (blocked.existing.leaseExpiresAt ?? 0) > Date.now() - 1_000);
    await sleep(SHORT_TTL_MS + 300);
    const retaken = await repo.add(id, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'rescuer' });
    assert.equal(retaken.added, true, 'lapsed lease not claimable');
    // The crashed worker's late confirm must not steal the rescuer's claim.
    assert.equal(await repo.confirm({ id, owner: 'crashed-worker' }, { ttlMs: LONG_TTL_MS }), false);
    assert.equal((await repo.get(id))?.owner, 'rescuer');
  });

  test('keeps a confirmed id for the TTL counted from confirmation, beyond the lease', async (repo) => {
    await repo.contains(uniqueId('warm'));
    const id = uniqueId('confirmed');
    await repo.add(id, { ttlMs: LONG_TTL_MS, leaseMs: SHORT_TTL_MS, owner: 'me' });
    assert.equal(await repo.confirm({ id, owner: 'me' }, { ttlMs: LONG_TTL_MS }), true);
    await sleep(SHORT_TTL_MS + 300);
    const again = await repo.add(id, { ttlMs: LONG_TTL_MS, leaseMs: SHORT_TTL_MS, owner: 'x' });
    assert.equal(again.added, false, 'confirmed id forgotten when the lease ended');
    assert.equal(!again.added && again.existing.state, 'confirmed');
  });

  test('judges liveness against options.now when given (event-time mode passes stream time)', async (repo) => {
    // A stream time far from the wall clock, as when replaying an old topic.
    const streamTime = 1_600_000_000_000;
    const id = uniqueId('stream');
    const added = await repo.add(id, { ttlMs: 10_000, now: streamTime }, { eventTime: streamTime });
    assert.equal(added.added && added.record.expiresAt, streamTime + 10_000);
    assert.equal((await repo.get(id, { now: streamTime + 9_999 }))?.eventTime, streamTime);
    assert.equal(await repo.contains(id, { now: streamTime + 10_000 }), false);
    assert.deepEqual(await repo.containsMany([id], { now: streamTime + 5_000 }), [true]);
    const again = await repo.add(id, { ttlMs: 10_000, now: streamTime + 5_000 });
    assert.equal(again.added, false);
    const later = await repo.add(
      id,
      { ttlMs: 10_000, now: streamTime + 10_000 },
      { eventTime: streamTime + 10_000 },
    );
    assert.equal(later.added, true, 'record past its expiry in stream time was not replaced');
    const records = await repo.getMany([id, uniqueId('absent')], { now: streamTime + 10_001 });
    assert.equal(records[0]?.eventTime, streamTime + 10_000);
    assert.equal(records[1], undefined);
  });

  test('keeps a record for at least minLifetimeMs of wall-clock time, whatever its expiry says (event-time writes)', async (repo) => {
    await repo.contains(uniqueId('warm'));
    // Event-time mode writes at stream time with a TTL that may be 1 ms, and judges liveness at stream time:
    // while the stream stands still the record must stay, though the store's clock runs on.
    const streamTime = Date.now();
    const id = uniqueId('lifetime');
    const added = await repo.add(
      id,
      { now: streamTime, ttlMs: 1, minLifetimeMs: LONG_TTL_MS },
      { eventTime: streamTime },
    );
    assert.equal(added.added, true);
    // Past a whole second of store TTL rounding (Cassandra, DynamoDB count seconds).
    await sleep(SHORT_TTL_MS + 1_300);
    const record = await repo.get(id, { now: streamTime });
    assert.equal(record?.eventTime, streamTime, 'the store forgot a record inside its minimum lifetime');
  });
}
