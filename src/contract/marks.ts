import assert from 'node:assert/strict';
import { markIds as mark } from '../store/mark.js';
import {
  type ContractSuite,
  claimBy,
  entriesOf,
  LONG_TTL_MS,
  repoTest,
  SHORT_TTL_MS,
  sleep,
  uniqueId,
  withinWindow,
} from './context.js';

/*
 * Lazy mode's mark may be a blind write (the consumer has just read the ids as absent), so what it may do to a
 * record that appeared since is left to the store; what it must never do is leave an id claimable.
 */
export function markTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('markMany stores confirmed records, with event time and fingerprint, answering per position', async (repo) => {
    const [a, b] = [uniqueId('mark-a'), uniqueId('mark-b')];
    assert.deepEqual(await mark(repo, [], { ttlMs: LONG_TTL_MS }), []);
    const marked = await mark(
      repo,
      [{ id: a, eventTime: 1_700_000_000_321, fingerprint: 'fp\u0001a' }, { id: b }, { id: a }],
      { ttlMs: LONG_TTL_MS },
    );
    assert.deepEqual(marked, [true, true, true]);
    const [ra, rb] = await repo.getMany([a, b]);
    assert.equal(ra?.state, 'confirmed');
    assert.equal(ra?.eventTime, 1_700_000_000_321);
    assert.equal(ra?.fingerprint, 'fp\u0001a');
    assert.equal(ra?.owner, undefined);
    assert.equal(rb?.state, 'confirmed');
    assert.ok((rb?.expiresAt ?? 0) > Date.now() + LONG_TTL_MS / 2, 'the mark keeps the id for its TTL');
    const again = await repo.add(b, claimBy('late'));
    assert.equal(!again.added && again.existing.state, 'confirmed');
  });

  test('a marked id is a duplicate until its TTL, then new', async (repo) => {
    await repo.contains(uniqueId('warm'));
    const { ids, found } = await withinWindow(SHORT_TTL_MS, 'mark, then look up', async () => {
      const ids = [uniqueId('mark-ttl'), uniqueId('mark-ttl')];
      await mark(repo, entriesOf(ids), { ttlMs: SHORT_TTL_MS });
      return { ids, found: await repo.containsMany(ids) };
    });
    assert.deepEqual(found, [true, true]);
    await sleep(SHORT_TTL_MS + 300);
    assert.deepEqual(await repo.containsMany(ids), [false, false], 'a mark outlived its TTL');
    assert.equal((await repo.add(ids[0] as string, { ttlMs: LONG_TTL_MS })).added, true);
  });

  test('a mark never leaves an id claimable: a live claim or confirmed record stays held, whatever the mark answers', async (repo) => {
    const [claimed, confirmed] = [uniqueId('mark-over-claim'), uniqueId('mark-over-confirmed')];
    await repo.add(claimed, claimBy('eager-worker'));
    await repo.add(confirmed, { ttlMs: LONG_TTL_MS }, { fingerprint: 'first' });
    const marked = await mark(repo, [{ id: claimed }, { id: confirmed }], { ttlMs: LONG_TTL_MS });
    // false: the store saw the live record and kept it; true: it wrote over it (a blind store).
    const [overClaim, overConfirmed] = await repo.getMany([claimed, confirmed]);
    if (marked[0] === false) assert.equal(overClaim?.owner, 'eager-worker', 'kept, so unchanged');
    else assert.equal(overClaim?.state, 'confirmed', 'written over, so confirmed');
    if (marked[1] === false) assert.equal(overConfirmed?.fingerprint, 'first', 'kept, so unchanged');
    else assert.equal(overConfirmed?.state, 'confirmed');
    for (const id of [claimed, confirmed]) {
      const r = await repo.add(id, claimBy('next'));
      assert.equal(r.added, false, `${id} became claimable after a mark`);
    }
  });

  test('a mark over a record that is no longer live replaces it whole', async (repo) => {
    await repo.contains(uniqueId('warm'));
    // A crashed worker's claim: its lease lapses, but the store keeps the row until its retention end.
    const id = uniqueId('mark-over-lapsed');
    await repo.add(id, claimBy('crashed', SHORT_TTL_MS), { fingerprint: 'old', eventTime: 1 });
    await sleep(SHORT_TTL_MS + 300);
    assert.equal(await repo.contains(id), false);
    assert.deepEqual(await mark(repo, [{ id }], { ttlMs: LONG_TTL_MS }), [true]);
    const record = await repo.get(id);
    assert.equal(record?.state, 'confirmed', 'the lapsed claim was not replaced by the mark');
    assert.equal(record?.owner, undefined, 'the old owner shows through');
    assert.equal(record?.leaseExpiresAt, undefined, 'the old lease shows through');
    assert.equal(record?.fingerprint, undefined, 'the old fingerprint shows through');
    assert.equal(record?.eventTime, undefined, 'the old event time shows through');
    assert.equal(await repo.confirm({ id, owner: 'crashed' }, { ttlMs: LONG_TTL_MS }), false);
  });
}
