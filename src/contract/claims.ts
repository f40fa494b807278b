import assert from 'node:assert/strict';
import { type ContractSuite, LONG_TTL_MS, repoTest, uniqueId } from './context.js';

const claimOptions = (owner: string) => ({ ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner });

export function claimTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test('confirm turns the owner’s claim into a confirmed record', async (repo) => {
    const id = uniqueId();
    await repo.add(id, claimOptions('a'));
    assert.equal((await repo.get(id))?.state, 'in-flight');
    assert.equal(await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS }), true);
    const record = await repo.get(id);
    assert.equal(record?.state, 'confirmed');
    assert.ok((record?.expiresAt ?? 0) > Date.now() + LONG_TTL_MS / 2);
  });

  test('confirm and remove by another owner change nothing', async (repo) => {
    const id = uniqueId();
    await repo.add(id, claimOptions('a'));
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
    await repo.add(id, claimOptions('a'));
    assert.equal(await repo.remove(id, 'a'), true);
    assert.equal(await repo.contains(id), false);
    assert.equal((await repo.add(id, claimOptions('b'))).added, true);
  });

  test('remove by owner does not delete a confirmed record; remove without owner does', async (repo) => {
    const id = uniqueId();
    await repo.add(id, claimOptions('a'));
    await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS });
    assert.equal(await repo.remove(id, 'a'), false);
    assert.equal(await repo.contains(id), true);
    assert.equal(await repo.remove(id), true);
    assert.equal(await repo.contains(id), false);
    assert.equal(await repo.remove(id), false);
  });
}
