import assert from 'node:assert/strict';
import { type ContractSuite, claimBy, entriesOf, LONG_TTL_MS, repoTest, uniqueId } from './context.js';

export function basicTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('declares its capabilities', async (repo, ctx) => {
    assert.deepEqual(repo.capabilities, ctx.options.capabilities);
  });

  test('adds a new id once, then reports it as a duplicate with the existing record', async (repo) => {
    const id = uniqueId();
    const first = await repo.add(id, { ttlMs: LONG_TTL_MS });
    assert.equal(first.added, true);
    assert.equal(first.added && first.record.state, 'confirmed');
    const second = await repo.add(id, { ttlMs: LONG_TTL_MS });
    assert.equal(second.added, false);
    assert.equal(!second.added && second.existing.state, 'confirmed');
    assert.equal(!second.added && second.existing.id, id);
    assert.equal(await repo.contains(id), true);
    assert.equal(await repo.contains(uniqueId('absent')), false);
  });

  test('keeps the event time and fingerprint of the record', async (repo) => {
    const id = uniqueId();
    await repo.add(id, { ttlMs: LONG_TTL_MS }, { eventTime: 1_700_000_000_123, fingerprint: 'sha256:abc' });
    const record = await repo.get(id);
    assert.equal(record?.eventTime, 1_700_000_000_123);
    assert.equal(record?.fingerprint, 'sha256:abc');
    const again = await repo.add(id, { ttlMs: LONG_TTL_MS });
    assert.equal(!again.added && again.existing.eventTime, 1_700_000_000_123);
  });

  test('lets exactly one of 100 concurrent adds of one id win', async (repo) => {
    const id = uniqueId('race');
    const results = await Promise.all(Array.from({ length: 100 }, (_, i) => repo.add(id, claimBy(`w${i}`))));
    const winners = results.filter((r) => r.added);
    assert.equal(winners.length, 1);
    const owner = winners[0]?.added ? winners[0].record.owner : undefined;
    for (const r of results) if (!r.added) assert.equal(r.existing.owner, owner);
  });

  test('clear() forgets every id', async (repo) => {
    const ids = [uniqueId(), uniqueId(), uniqueId()];
    await repo.addMany(entriesOf(ids), { ttlMs: LONG_TTL_MS });
    assert.deepEqual(await repo.containsMany(ids), [true, true, true]);
    await repo.clear();
    assert.deepEqual(await repo.containsMany(ids), [false, false, false]);
    assert.equal((await repo.add(ids[0] as string, { ttlMs: LONG_TTL_MS })).added, true);
  });
}
