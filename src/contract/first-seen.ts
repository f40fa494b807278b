import assert from 'node:assert/strict';
import { markIds } from '../store/mark.js';
import type { FastPath } from '../store/single-key.js';
import type { IdempotentRepository } from '../store/types.js';
import { type ContractSuite, claimBy, LONG_TTL_MS, repoTest, scanned, uniqueIds } from './context.js';

/**
 * `firstSeenAt`: the `now` of the add that created the record, kept through confirm, renew and a result, new when
 * a new record replaces one that lapsed or was removed. Each add passes a distinct `now` a little in the past, so
 * a store that stamps its own clock, or the confirm's, is caught; every record stays live by the store's clock.
 */
export function firstSeenTests(suite: ContractSuite): void {
  const { options } = suite;
  const test = repoTest(suite);
  test('keeps the time a claim or a mark first saw the id, through confirm, renew and a result', async (repo: FastPath, ctx) => {
    const t = Date.now() - 20_000;
    const [claimed, marked, direct, directMark] = uniqueIds('fs-claim', 'fs-mark', 'fs-direct', 'fs-dmark');
    const claim = claimBy('fs-owner');

    const added = await repo.add(claimed, { ...claim, now: t }, { fingerprint: 'fp' });
    assert.equal(added.added && added.record.firstSeenAt, t, "a claim's record carries its add's now");
    const blocked = await repo.add(claimed, { ...claim, owner: 'other', now: t + 1_000 });
    assert.equal(!blocked.added && blocked.existing.firstSeenAt, t, 'a blocked add reports the first time');
    if (repo.renew) {
      assert.equal(await repo.renew({ id: claimed, owner: 'fs-owner' }, { leaseMs: LONG_TTL_MS }), true);
      assert.equal((await repo.get(claimed))?.firstSeenAt, t, 'renew keeps firstSeenAt');
    }
    assert.equal(
      await repo.confirm({ id: claimed, owner: 'fs-owner' }, { ttlMs: LONG_TTL_MS, result: 'r' }),
      true,
    );
    const confirmed = await repo.get(claimed);
    assert.equal(confirmed?.state, 'confirmed');
    assert.equal(confirmed?.result, 'r');
    assert.equal(confirmed?.firstSeenAt, t, 'confirm with a result keeps firstSeenAt');

    const lazy = await repo.add(marked, { ttlMs: LONG_TTL_MS, now: t + 2_000 }, { result: 'kept' });
    assert.equal(lazy.added && lazy.record.firstSeenAt, t + 2_000, "a lazy mark's record carries its now");

    const viaDirect = await (repo.addDirect ?? repo.add).call(repo, direct, {
      ...claim,
      now: t + 3_000,
    });
    assert.equal(viaDirect.added && viaDirect.record.firstSeenAt, t + 3_000, 'addDirect');
    assert.equal(
      await (repo.confirmDirect ?? repo.confirm).call(
        repo,
        { id: direct, owner: 'fs-owner' },
        { ttlMs: LONG_TTL_MS },
      ),
      true,
    );
    if (repo.markDirect) {
      assert.equal(await repo.markDirect({ id: directMark }, { ttlMs: LONG_TTL_MS, now: t + 4_000 }), true);
    } else {
      await markIds(repo, [{ id: directMark }], { ttlMs: LONG_TTL_MS, now: t + 4_000 });
    }

    const expected = new Map<string, number>([
      [claimed, t],
      [marked, t + 2_000],
      [direct, t + 3_000],
      [directMark, t + 4_000],
    ]);
    const check = async (where: string, r: FastPath) => {
      const ids = [...expected.keys()];
      const records = await r.getMany(ids);
      assert.deepEqual(
        records.map((rec) => rec?.firstSeenAt),
        [...expected.values()],
        `getMany ${where}`,
      );
      for (const id of ids) {
        assert.equal(
          (await (r.getDirect ?? r.get).call(r, id))?.firstSeenAt,
          expected.get(id),
          `get ${where}`,
        );
      }
      if (r.scan) {
        const seen = await scanned(r);
        for (const id of ids) assert.equal(seen.get(id)?.firstSeenAt, expected.get(id), `scan ${where}`);
      }
    };
    await check('after the writes', repo);
    if (options.capabilities.persistent) {
      await repo.close();
      await check('after a reopen', await ctx.open());
    }
  });

  test('a new record after the old one lapsed, expired or was removed gets its own first-seen time', async (repo) => {
    const t = Date.now() - 20_000;
    const [lapsed, expired, removed] = uniqueIds('fs-lapsed', 'fs-expired', 'fs-removed');

    await repo.add(lapsed, { ttlMs: LONG_TTL_MS, leaseMs: 1_000, owner: 'a', now: t });
    const taken = await repo.add(lapsed, { ...claimBy('b'), now: t + 2_000 });
    assert.equal(taken.added && taken.record.firstSeenAt, t + 2_000, 'a takeover of a lapsed claim');
    assert.equal((await repo.get(lapsed))?.firstSeenAt, t + 2_000);

    await repo.add(expired, { ttlMs: 1_000, now: t });
    const again = await repo.add(expired, { ttlMs: LONG_TTL_MS, now: t + 3_000 });
    assert.equal(again.added && again.record.firstSeenAt, t + 3_000, 'a mark after the old one expired');
    assert.equal((await repo.get(expired))?.firstSeenAt, t + 3_000);

    await repo.add(removed, { ttlMs: LONG_TTL_MS, now: t });
    assert.equal(await repo.remove(removed), true);
    const fresh = await repo.add(removed, { ...claimBy('c'), now: t + 4_000 });
    assert.equal(fresh.added && fresh.record.firstSeenAt, t + 4_000, 'a claim after a remove');
    assert.equal((await repo.get(removed))?.firstSeenAt, t + 4_000);
  });

  test('batch adds, marks and confirms keep each id’s first-seen time', async (repo) => {
    const t = Date.now() - 20_000;
    const claims = uniqueIds('fs-bc', 'fs-bc', 'fs-bc');
    const lazies = uniqueIds('fs-bl', 'fs-bl');
    const marks = uniqueIds('fs-bm', 'fs-bm');

    const claimed = await repo.addMany(
      claims.map((id, i) => (i === 1 ? { id, fingerprint: 'fp', eventTime: 1_700_000_000_000 } : { id })),
      { ...claimBy('fs-batch'), now: t },
    );
    assert.deepEqual(
      claimed.map((r) => r.added && r.record.firstSeenAt),
      [t, t, t],
    );
    const lazy = await repo.addMany(
      lazies.map((id) => ({ id, result: 'x' })),
      { ttlMs: LONG_TTL_MS, now: t + 1_000 },
    );
    assert.deepEqual(
      lazy.map((r) => r.added && r.record.firstSeenAt),
      [t + 1_000, t + 1_000],
    );
    await markIds(
      repo,
      marks.map((id, i) => (i === 0 ? { id } : { id, fingerprint: 'fp' })),
      { ttlMs: LONG_TTL_MS, now: t + 2_000 },
    );
    assert.deepEqual(
      await repo.confirmMany(
        claims.map((id, i) =>
          i === 2 ? { id, owner: 'fs-batch', result: 'done' } : { id, owner: 'fs-batch' },
        ),
        { ttlMs: LONG_TTL_MS },
      ),
      [true, true, true],
    );
    const records = await repo.getMany([...claims, ...lazies, ...marks]);
    assert.deepEqual(
      records.map((r) => r?.firstSeenAt),
      [t, t, t, t + 1_000, t + 1_000, t + 2_000, t + 2_000],
    );
    const again = await repo.addMany(
      [...claims, ...marks].map((id) => ({ id })),
      { ...claimBy('late'), now: t + 5_000 },
    );
    assert.deepEqual(
      again.map((r) => !r.added && r.existing.firstSeenAt),
      [t, t, t, t + 2_000, t + 2_000],
      'a blocked batch add reports each first time',
    );
  });

  test('one confirmMany of claims made at different times keeps each one’s first-seen time', async (repo, ctx) => {
    const t = Date.now() - 20_000;
    const ids = uniqueIds('fs-ca', 'fs-cb', 'fs-cc', 'fs-cd', 'fs-ce');
    const [a, b, c, d, e] = ids;
    const claim = (owner: string, now: number) => ({ ...claimBy(owner), now });
    // Separate adds, so each claim has its own first-seen time; c carries its own fields, e shares a's time.
    await repo.add(a, claim('fs-o1', t));
    await repo.add(b, claim('fs-o2', t + 1_000));
    await repo.add(c, claim('fs-o1', t + 2_000), { fingerprint: 'fp', eventTime: 1_700_000_000_000 });
    await repo.add(d, claim('fs-o1', t + 3_000));
    await repo.add(e, claim('fs-o2', t));
    assert.deepEqual(
      await repo.confirmMany(
        [
          { id: a, owner: 'fs-o1' },
          { id: b, owner: 'fs-o2' },
          { id: c, owner: 'fs-o1' },
          { id: d, owner: 'fs-o1' },
          { id: e, owner: 'fs-o2' },
        ],
        { ttlMs: LONG_TTL_MS },
      ),
      [true, true, true, true, true],
    );
    const firstSeen = [t, t + 1_000, t + 2_000, t + 3_000, t];
    const check = async (where: string, r: IdempotentRepository) => {
      const records = await r.getMany(ids);
      assert.deepEqual(
        records.map((rec) => rec?.firstSeenAt),
        firstSeen,
        `getMany ${where}`,
      );
      assert.deepEqual(
        records.map((rec) => [rec?.state, rec?.fingerprint, rec?.eventTime]),
        ids.map((id) =>
          id === c ? ['confirmed', 'fp', 1_700_000_000_000] : ['confirmed', undefined, undefined],
        ),
        `own fields ${where}`,
      );
      for (const [i, id] of ids.entries()) {
        assert.equal((await r.get(id))?.firstSeenAt, firstSeen[i], `get ${where}`);
      }
      if (r.scan) {
        const seen = await scanned(r);
        for (const [i, id] of ids.entries())
          assert.equal(seen.get(id)?.firstSeenAt, firstSeen[i], `scan ${where}`);
      }
    };
    await check('after the confirm', repo);
    if (options.capabilities.persistent) {
      await repo.close();
      await check('after a reopen', await ctx.open());
    }
  });
}
