import assert from 'node:assert/strict';
import { RepositoryClosedError } from '../errors.js';
import { type ContractSuite, claimBy, LONG_TTL_MS, repoTest, uniqueId, whenPersistent } from './context.js';

export function lifecycleTests(suite: ContractSuite): void {
  const { options } = suite;
  const test = repoTest(suite);
  test('rejects every operation after close() with RepositoryClosedError', async (repo) => {
    await repo.add(uniqueId(), { ttlMs: LONG_TTL_MS });
    await repo.close();
    await repo.close(); // closing twice is harmless
    const id = uniqueId();
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['add', () => repo.add(id, { ttlMs: LONG_TTL_MS })],
      ['addMany', () => repo.addMany([{ id }], { ttlMs: LONG_TTL_MS })],
      ['contains', () => repo.contains(id)],
      ['containsMany', () => repo.containsMany([id])],
      ['get', () => repo.get(id)],
      ['confirm', () => repo.confirm({ id, owner: 'o' }, { ttlMs: LONG_TTL_MS })],
      ['confirmMany', () => repo.confirmMany([{ id, owner: 'o' }], { ttlMs: LONG_TTL_MS })],
      ['remove', () => repo.remove(id)],
      ['clear', () => repo.clear()],
    ];
    for (const [name, call] of calls) {
      await assert.rejects(call(), (error: unknown) => {
        assert.ok(error instanceof RepositoryClosedError, `${name}: ${String(error)}`);
        assert.equal(error.code, 'IDEM_ERR_REPOSITORY_CLOSED');
        return true;
      });
    }
  });

  test(
    'keeps its ids across close and reopen when persistent',
    whenPersistent(options),
    async (first, ctx) => {
      const confirmed = uniqueId('kept');
      const claimed = uniqueId('claimed');
      await first.add(confirmed, { ttlMs: LONG_TTL_MS });
      await first.add(claimed, claimBy('o'));
      await first.close();
      const reopened = await ctx.open();
      assert.equal(await reopened.contains(confirmed), true);
      const record = await reopened.get(claimed);
      assert.equal(record?.state, 'in-flight');
      assert.equal(record?.owner, 'o');
      assert.equal(await reopened.confirm({ id: claimed, owner: 'o' }, { ttlMs: LONG_TTL_MS }), true);
    },
  );
}
