import assert from 'node:assert/strict';
import { type ContractSuite, claimBy, entriesOf, LONG_TTL_MS, repoTest, uniqueId } from './context.js';

export function batchTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('addMany answers per position, first occurrence inside the batch wins', async (repo) => {
    const [a, b, c] = [uniqueId('a'), uniqueId('b'), uniqueId('c')];
    await repo.add(c, { ttlMs: LONG_TTL_MS });
    const results = await repo.addMany(
      [{ id: a, eventTime: 1 }, { id: b }, { id: a, eventTime: 2 }, { id: c }, { id: b }],
      claimBy('w'),
    );
    assert.deepEqual(
      results.map((r) => r.added),
      [true, true, false, false, false],
    );
    const repeatOfA = results[2];
    assert.equal(repeatOfA && !repeatOfA.added && repeatOfA.existing.eventTime, 1);
    const existingC = results[3];
    assert.equal(existingC && !existingC.added && existingC.existing.state, 'confirmed');
  });

  test('addMany of an empty list is a no-op', async (repo) => {
    assert.deepEqual(await repo.addMany([], { ttlMs: LONG_TTL_MS }), []);
    assert.deepEqual(await repo.containsMany([]), []);
    assert.deepEqual(await repo.confirmMany([], { ttlMs: LONG_TTL_MS }), []);
  });

  test('addMany of 1000 ids stores each, containsMany and confirmMany answer per position', async (repo) => {
    const ids = Array.from({ length: 1000 }, (_, i) => uniqueId(`bulk${i}`));
    const added = await repo.addMany(entriesOf(ids), claimBy('bulk'));
    assert.equal(added.filter((r) => r.added).length, 1000);
    const probe = [...ids.slice(0, 10), uniqueId('absent'), ...ids.slice(990)];
    assert.deepEqual(await repo.containsMany(probe), [
      ...Array(10).fill(true),
      false,
      ...Array(10).fill(true),
    ]);
    const confirmed = await repo.confirmMany(
      [
        { id: ids[0] as string, owner: 'bulk' },
        { id: ids[1] as string, owner: 'thief' },
        { id: uniqueId(), owner: 'bulk' },
      ],
      { ttlMs: LONG_TTL_MS },
    );
    assert.deepEqual(confirmed, [true, false, false]);
    const again = await repo.addMany(entriesOf(ids.slice(0, 3)), { ttlMs: LONG_TTL_MS });
    assert.deepEqual(
      again.map((r) => !r.added && r.existing.state),
      ['confirmed', 'in-flight', 'in-flight'],
    );
  });
}
