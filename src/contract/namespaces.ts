import assert from 'node:assert/strict';
import { type ContractSuite, claimBy, entriesOf, LONG_TTL_MS, repoTest, uniqueId } from './context.js';

/*
 * Two namespaces of which one is a prefix of the other (`app:`, `app:orders:`): a store that glues the namespace
 * in front of the id stores `42` of the inner one and `orders:42` of the outer one under one key. Each test's
 * inner namespace is its own extended by `:orders`.
 */

/** The ids under which the outer namespace could meet the inner namespace's `id`, whatever separator is used. */
const spellings = (id: string) => [id, `orders:${id}`, `:orders:${id}`, `orders${id}`, `orders/${id}`];

export function namespaceTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('a namespace never sees the ids of a namespace it is a prefix of, nor the other way round', async (outer, ctx) => {
    const inner = await ctx.open(`${ctx.namespace}:orders`);
    const id = uniqueId('42');
    assert.equal((await inner.add(id, { ttlMs: LONG_TTL_MS })).added, true);
    for (const seen of spellings(id)) {
      assert.equal(await outer.contains(seen), false, `outer namespace sees the inner ${id} as ${seen}`);
      assert.equal(await outer.get(seen), undefined, seen);
      assert.equal((await outer.add(seen, { ttlMs: LONG_TTL_MS })).added, true, seen);
    }
    // The outer namespace's ids, among them `orders:<id>`, are just as invisible from inside.
    const other = uniqueId('43');
    assert.equal((await outer.add(`orders:${other}`, { ttlMs: LONG_TTL_MS })).added, true);
    assert.deepEqual(await inner.containsMany([other, `orders:${other}`]), [false, false]);
    assert.equal((await inner.add(other, { ttlMs: LONG_TTL_MS })).added, true);
    // Each namespace still holds exactly its own.
    assert.equal(await inner.contains(id), true);
    assert.equal(await outer.contains(`orders:${other}`), true);
  });

  test('clear() of a namespace leaves the ids of a namespace it is a prefix of, and the other way round', async (outer, ctx) => {
    const inner = await ctx.open(`${ctx.namespace}:orders`);
    const innerIds = [uniqueId('42'), uniqueId('43')];
    const outerIds = [uniqueId('44'), `orders:${uniqueId('45')}`];
    await inner.addMany(entriesOf(innerIds), { ttlMs: LONG_TTL_MS });
    await outer.addMany(entriesOf(outerIds), claimBy('o'));

    await outer.clear();
    assert.deepEqual(await outer.containsMany(outerIds), [false, false], 'clear() left its own ids');
    assert.deepEqual(
      await inner.containsMany(innerIds),
      [true, true],
      'clear() of app: deleted app:orders: ids',
    );

    await outer.addMany(entriesOf(outerIds), { ttlMs: LONG_TTL_MS });
    await inner.clear();
    assert.deepEqual(await inner.containsMany(innerIds), [false, false], 'clear() left its own ids');
    assert.deepEqual(
      await outer.containsMany(outerIds),
      [true, true],
      'clear() of app:orders: deleted app: ids',
    );
  });
}
