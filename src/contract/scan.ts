import assert from 'node:assert/strict';
import { type ContractSuite, LONG_TTL_MS, repoTest, scanned, uniqueId, uniqueIds } from './context.js';

/** `scan`, optional (declared by its presence like `renew`): checked only where the store has it. */
export function scanTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('scan reports each record of the namespace with its state and fields, and no other namespace’s', async (repo, ctx) => {
    if (repo.scan === undefined) return;
    const inner = await ctx.open(`${ctx.namespace}:orders`);
    const [claim, mark, done, removed, binary] = uniqueIds('claim', 'mark', 'done', 'gone', 'bin');
    const bytes = Buffer.from(`\u00ff${binary}`, 'latin1');
    await repo.add(claim, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'o-1' });
    await repo.add(mark, { ttlMs: LONG_TTL_MS }, { fingerprint: 'fp', eventTime: 1_700_000_000_000 });
    await repo.add(done, { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner: 'o-2' });
    await repo.confirm({ id: done, owner: 'o-2' }, { ttlMs: LONG_TTL_MS, result: 'r' });
    await repo.add(removed, { ttlMs: LONG_TTL_MS });
    await repo.remove(removed);
    await repo.add(bytes, { ttlMs: LONG_TTL_MS });
    await inner.add(uniqueId('inner'), { ttlMs: LONG_TTL_MS });

    const seen = await scanned(repo);
    assert.equal(seen.size, 4, `scan reported ${[...seen.keys()].map((k) => JSON.stringify(k)).join(', ')}`);
    for (const id of [claim, mark, done, bytes]) {
      const stored = await repo.get(id);
      assert.ok(stored, `${String(id)} is stored`);
      assert.deepEqual(seen.get(stored.id), stored, `scan reports ${JSON.stringify(stored.id)} as get does`);
    }
    assert.equal(seen.get(claim)?.state, 'in-flight');
    assert.equal(seen.get(claim)?.owner, 'o-1');
    assert.equal(seen.get(done)?.result, 'r');
    const innerSeen = await scanned(inner);
    assert.equal(innerSeen.size, 1, 'the nested namespace reports only its own record');
  });
}
