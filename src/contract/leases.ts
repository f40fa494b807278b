import assert from 'node:assert/strict';
import { type ContractSuite, LONG_TTL_MS, repoTest, SHORT_TTL_MS, sleep, uniqueId } from './context.js';

/*
 * A lease only decides when someone else may take an id over; it must never decide whether the owner's work is
 * recorded. A store whose own expiry drops the in-flight record at the lease end loses the confirm of a slow
 * handler, and the redelivery runs the handler a second time.
 */

const claim = (owner: string) => ({ ttlMs: LONG_TTL_MS, leaseMs: SHORT_TTL_MS, owner });

/** Past the lease by over a second, so a store's expiry rounded to whole seconds (Cassandra's TTL) has passed. */
const PAST_LEASE_MS = SHORT_TTL_MS + 1_300;

export function leaseTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('a claim whose handler outlives its lease, with no other owner taking the id, can still be confirmed', async (repo) => {
    await repo.contains(uniqueId('warm'));
    const single = uniqueId('slow');
    const batched = [uniqueId('slow-batch'), uniqueId('slow-batch')];
    assert.equal((await repo.add(single, claim('slow-worker'))).added, true);
    const claims = await repo.addMany(
      batched.map((id) => ({ id, fingerprint: 'fp' })),
      claim('slow-worker'),
    );
    assert.deepEqual(
      claims.map((c) => c.added),
      [true, true],
    );
    // The handler runs past the lease; nobody else asks for the ids meanwhile.
    await sleep(PAST_LEASE_MS);
    assert.equal(
      await repo.confirm({ id: single, owner: 'slow-worker' }, { ttlMs: LONG_TTL_MS }),
      true,
      'the confirm of a claim past its lease, never taken over, was refused',
    );
    assert.deepEqual(
      await repo.confirmMany(
        batched.map((id) => ({ id, owner: 'slow-worker' })),
        { ttlMs: LONG_TTL_MS },
      ),
      [true, true],
      'confirmMany of claims past their lease, never taken over, was refused',
    );
    for (const id of [single, ...batched]) {
      const record = await repo.get(id);
      assert.equal(record?.state, 'confirmed', id);
      assert.equal(await repo.contains(id), true, id);
      const again = await repo.add(id, claim('redelivery'));
      assert.equal(again.added, false, `the confirmed id ${id} was claimable again`);
      assert.equal(!again.added && again.existing.state, 'confirmed');
    }
    assert.equal((await repo.get(batched[0] as string))?.fingerprint, 'fp');
  });

  test('after another owner takes over a lapsed claim, the first owner’s confirm returns false and the new claim stands', async (repo) => {
    await repo.contains(uniqueId('warm'));
    const taken = uniqueId('taken');
    const kept = uniqueId('kept');
    await repo.addMany([{ id: taken }, { id: kept }], claim('slow-worker'));
    await sleep(PAST_LEASE_MS);
    const rescue = await repo.add(taken, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'rescuer' });
    assert.equal(rescue.added, true, 'a lapsed claim could not be taken over');
    assert.deepEqual(
      await repo.confirmMany(
        [
          { id: taken, owner: 'slow-worker' },
          { id: kept, owner: 'slow-worker' },
        ],
        { ttlMs: LONG_TTL_MS },
      ),
      [false, true],
    );
    assert.equal(await repo.confirm({ id: taken, owner: 'slow-worker' }, { ttlMs: LONG_TTL_MS }), false);
    assert.equal(await repo.remove(taken, 'slow-worker'), false);
    const record = await repo.get(taken);
    assert.equal(record?.state, 'in-flight');
    assert.equal(record?.owner, 'rescuer');
    assert.equal(await repo.confirm({ id: taken, owner: 'rescuer' }, { ttlMs: LONG_TTL_MS }), true);
    assert.equal((await repo.get(taken))?.state, 'confirmed');
  });
}
