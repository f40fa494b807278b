import assert from 'node:assert/strict';
import { it } from 'node:test';
import { InvalidIdError } from '../../src/errors.js';
import { type ContractContext, LONG_TTL_MS, uniqueId } from './context.js';

export function idTests(
  withContext: (fn: (ctx: ContractContext) => Promise<void>) => () => Promise<void>,
): void {
  it(
    'rejects an empty id with InvalidIdError',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      await assert.rejects(repo.add('', { ttlMs: LONG_TTL_MS }), InvalidIdError);
      await assert.rejects(repo.add(new Uint8Array(0), { ttlMs: LONG_TTL_MS }), InvalidIdError);
      await assert.rejects(repo.contains(''), InvalidIdError);
    }),
  );

  it(
    'stores unicode ids exactly',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      const base = uniqueId('ü');
      const ids = [
        `${base}-日本語`,
        `${base}-😀`,
        `${base}-e\u0301`,
        `${base}-\u00e9`,
        `${base} with spaces:and|pipes`,
      ];
      for (const id of ids) assert.equal((await repo.add(id, { ttlMs: LONG_TTL_MS })).added, true, id);
      for (const id of ids) assert.equal((await repo.add(id, { ttlMs: LONG_TTL_MS })).added, false, id);
      await assert.rejects(repo.add(`${base}\ud800`, { ttlMs: LONG_TTL_MS }), InvalidIdError);
    }),
  );

  it(
    'stores binary ids, distinct from each other and from text ids',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      const seed = Buffer.from(uniqueId());
      const a = Buffer.concat([Buffer.from([0, 255, 1, 254]), seed]);
      const b = Buffer.concat([Buffer.from([0, 255, 1, 253]), seed]);
      assert.equal((await repo.add(a, { ttlMs: LONG_TTL_MS })).added, true);
      assert.equal((await repo.add(b, { ttlMs: LONG_TTL_MS })).added, true);
      assert.equal((await repo.add(new Uint8Array(a), { ttlMs: LONG_TTL_MS })).added, false);
      assert.equal(await repo.contains(a.toString('latin1')), false);
    }),
  );

  it(
    'accepts ids up to the declared limit and rejects longer ones',
    withContext(async (ctx) => {
      const repo = await ctx.open();
      const max = ctx.options.capabilities.maxIdBytes;
      const prefix = uniqueId('big');
      const atLimit = prefix + 'x'.repeat(max - Buffer.byteLength(prefix));
      assert.equal((await repo.add(atLimit, { ttlMs: LONG_TTL_MS })).added, true);
      assert.equal(await repo.contains(atLimit), true);
      await assert.rejects(repo.add(`${atLimit}x`, { ttlMs: LONG_TTL_MS }), InvalidIdError);
      // Multi-byte characters count in bytes, not UTF-16 units.
      await assert.rejects(repo.add('é'.repeat(max / 2 + 1), { ttlMs: LONG_TTL_MS }), InvalidIdError);
    }),
  );
}
