import assert from 'node:assert/strict';
import { isTransactional } from '../store/transaction.js';
import type { IdempotentRepository } from '../store/types.js';
import { type ContractSuite, claimBy, entriesOf, LONG_TTL_MS, repoTest, uniqueId } from './context.js';

/**
 * Confirms a claim named twice in one confirmMany (one of the two takes it: a store may run them in any order),
 * and another claim in two calls (the first takes it).
 */
async function confirmTwice(repo: IdempotentRepository): Promise<void> {
  const [once, twice] = [uniqueId('once'), uniqueId('twice')];
  await repo.addMany([{ id: once }, { id: twice }], claimBy('a'));
  const claim = { id: once, owner: 'a' };
  const answers = await repo.confirmMany([claim, claim], { ttlMs: LONG_TTL_MS });
  assert.equal(answers.filter((ok) => ok).length, 1, `confirmMany of one claim twice answered ${answers}`);
  assert.equal(await repo.confirm({ id: twice, owner: 'a' }, { ttlMs: LONG_TTL_MS }), true);
  assert.equal(await repo.confirm({ id: twice, owner: 'a' }, { ttlMs: LONG_TTL_MS }), false);
  assert.deepEqual(await repo.confirmMany([{ id: twice, owner: 'a' }], { ttlMs: LONG_TTL_MS }), [false]);
}

export function claimTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('confirm turns the owner’s claim into a confirmed record', async (repo) => {
    const id = uniqueId();
    await repo.add(id, claimBy('a'));
    assert.equal((await repo.get(id))?.state, 'in-flight');
    assert.equal(await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS }), true);
    const record = await repo.get(id);
    assert.equal(record?.state, 'confirmed');
    assert.ok((record?.expiresAt ?? 0) > Date.now() + LONG_TTL_MS / 2);
  });

  test('a claim is confirmed once: named twice in one confirmMany, or again in a later call (in a transaction too)', async (repo) => {
    await confirmTwice(repo);
    if (isTransactional(repo)) await repo.transaction(() => confirmTwice(repo));
  });

  test('a remove racing the owner’s confirm leaves the id removed, after a reopen too when persistent', async (repo, ctx) => {
    const ids = Array.from({ length: 20 }, () => uniqueId('raced'));
    await repo.addMany(entriesOf(ids), claimBy('a'));
    // Whichever the store runs first, the remove (of any record) leaves nothing.
    await Promise.all(
      ids.flatMap((id) => [repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS }), repo.remove(id)]),
    );
    const none = ids.map(() => false);
    assert.deepEqual(await repo.containsMany(ids), none);
    if (!ctx.options.capabilities.persistent) return;
    await repo.close();
    assert.deepEqual(
      await (await ctx.open()).containsMany(ids),
      none,
      'a removed id came back at the reopen',
    );
  });

  test('confirm and remove by another owner change nothing', async (repo) => {
    const id = uniqueId();
    await repo.add(id, claimBy('a'));
    assert.equal(await repo.confirm({ id, owner: 'b' }, { ttlMs: LONG_TTL_MS }), false);
    assert.equal(await repo.remove(id, 'b'), false);
    const record = await repo.get(id);
    assert.equal(record?.state, 'in-flight');
    assert.equal(record?.owner, 'a');
  });

  test('confirm of an absent id returns false and creates nothing', async (repo) => {
    const id = uniqueId();
    assert.equal(await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS }), false);
    assert.equal(await repo.contains(id), false);
  });

  test('remove by the owner releases the claim so a retry can claim it', async (repo) => {
    const id = uniqueId();
    await repo.add(id, claimBy('a'));
    assert.equal(await repo.remove(id, 'a'), true);
    assert.equal(await repo.contains(id), false);
    assert.equal((await repo.add(id, claimBy('b'))).added, true);
  });

  test('remove by owner does not delete a confirmed record; remove without owner does', async (repo) => {
    const id = uniqueId();
    await repo.add(id, claimBy('a'));
    await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS });
    assert.equal(await repo.remove(id, 'a'), false);
    assert.equal(await repo.contains(id), true);
    assert.equal(await repo.remove(id), true);
    assert.equal(await repo.contains(id), false);
    assert.equal(await repo.remove(id), false);
  });
}
