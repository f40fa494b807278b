import assert from 'node:assert/strict';
import { type ContractSuite, LONG_TTL_MS, uniqueId } from './context.js';

const claimOptions = (owner: string) => ({ ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS, owner });

export function claimTests({ it, withContext }: ContractSuite): void {
  it(
    'confirm turns the owner’s claim into a confirmed record',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      const id = uniqueId();
      await repo.add(id, claimOptions('a'));
      assert.equal((await repo.get(id))?.state, 'in-flight');
      assert.equal(await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS }), true);
      const record = await repo.get(id);
      assert.equal(record?.state, 'confirmed');
      assert.ok((record?.expiresAt ?? 0) > Date.now() + LONG_TTL_MS / 2);
    }),
  );

  it(
    'confirm and remove by another owner change nothing',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      const id = uniqueId();
      await repo.add(id, claimOptions('a'));
      assert.equal(await repo.confirm({ id, owner: 'b' }, { ttlMs: LONG_TTL_MS }), false);
      assert.equal(await repo.remove(id, 'b'), false);
      const record = await repo.get(id);
      assert.equal(record?.state, 'in-flight');
      assert.equal(record?.owner, 'a');
    }),
  );

  it(
    'confirm of an absent id returns false and creates nothing',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      const id = uniqueId();
      assert.equal(await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS }), false);
      assert.equal(await repo.contains(id), false);
    }),
  );

  it(
    'remove by the owner releases the claim so a retry can claim it',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      const id = uniqueId();
      await repo.add(id, claimOptions('a'));
      assert.equal(await repo.remove(id, 'a'), true);
      assert.equal(await repo.contains(id), false);
      assert.equal((await repo.add(id, claimOptions('b'))).added, true);
    }),
  );

  it(
    'remove by owner does not delete a confirmed record; remove without owner does',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      const id = uniqueId();
      await repo.add(id, claimOptions('a'));
      await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS });
      assert.equal(await repo.remove(id, 'a'), false);
      assert.equal(await repo.contains(id), true);
      assert.equal(await repo.remove(id), true);
      assert.equal(await repo.contains(id), false);
      assert.equal(await repo.remove(id), false);
    }),
  );
}
