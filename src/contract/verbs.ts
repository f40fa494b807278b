import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { markIds } from '../store/mark.js';
import type { FastPath } from '../store/single-key.js';
import type {
  AddEntry,
  AddOptions,
  IdempotencyRecord,
  IdempotentRepository,
  MarkOptions,
} from '../store/types.js';
import { type ContractSuite, claimBy, LONG_TTL_MS, repoTest, uniqueId, whenPersistent } from './context.js';

/** What a test compares of a record: everything but its id and its times (two calls never share a clock tick). */
function shape(record: IdempotencyRecord | undefined): Record<string, unknown> | undefined {
  if (record === undefined) return undefined;
  const { id: _id, expiresAt: _e, leaseExpiresAt, firstSeenAt, ...rest } = record;
  // A lease is compared by which one it is: none, the first (LONG_TTL_MS), or a renewed one (twice that).
  const lease =
    leaseExpiresAt === undefined
      ? 'none'
      : leaseExpiresAt > Date.now() + LONG_TTL_MS * 1.5
        ? 'renewed'
        : 'first';
  // First seen is compared by presence (the first-seen contract checks its value).
  return { ...rest, lease, firstSeen: firstSeenAt !== undefined };
}

const CLAIM: AddOptions = claimBy('owner-1');
const MARK: MarkOptions = { ttlMs: LONG_TTL_MS };

/** The lazy mark as the consumer calls it: `markMany`, or `addMany` for a store written before it. */
async function markAsync(repo: IdempotentRepository, entry: AddEntry): Promise<boolean> {
  return (await markIds(repo, [entry], MARK))[0] === true;
}

/** The write verbs of the interface, each on fresh ids (an eager claim first where the verb needs one). */
const WRITES: Record<
  string,
  {
    run(repo: FastPath, id: string): Promise<void>;
    /** The id must be gone afterwards. */
    absent?: true;
    /** Skipped where the store does not have the verb. */
    has?(repo: FastPath): boolean;
  }
> = {
  add: {
    run: async (repo, id) => assert.equal((await repo.add(id, CLAIM, { fingerprint: 'fp' })).added, true),
  },
  'add (lazy mark)': {
    run: async (repo, id) => assert.equal((await repo.add(id, MARK, { fingerprint: 'fp' })).added, true),
  },
  addMany: {
    run: async (repo, id) =>
      assert.equal((await repo.addMany([{ id, fingerprint: 'fp' }], CLAIM))[0]?.added, true),
  },
  markMany: {
    run: async (repo, id) => assert.equal(await markAsync(repo, { id, fingerprint: 'fp' }), true),
  },
  confirm: {
    run: async (repo, id) => {
      await repo.add(id, CLAIM, { fingerprint: 'fp' });
      assert.equal(await repo.confirm({ id, owner: 'owner-1' }, { ttlMs: LONG_TTL_MS, result: 'r' }), true);
    },
  },
  confirmMany: {
    run: async (repo, id) => {
      await repo.add(id, CLAIM, { fingerprint: 'fp' });
      const [ok] = await repo.confirmMany([{ id, owner: 'owner-1', result: 'r' }], { ttlMs: LONG_TTL_MS });
      assert.equal(ok, true);
    },
  },
  renew: {
    has: (repo) => repo.renew !== undefined,
    run: async (repo, id) => {
      await repo.add(id, CLAIM, { fingerprint: 'fp' });
      assert.equal(await repo.renew?.({ id, owner: 'owner-1' }, { leaseMs: LONG_TTL_MS * 2 }), true);
    },
  },
  remove: {
    absent: true,
    run: async (repo, id) => {
      await repo.add(id, MARK);
      assert.equal(await repo.remove(id), true);
    },
  },
  'remove (owner)': {
    absent: true,
    run: async (repo, id) => {
      await repo.add(id, CLAIM);
      assert.equal(await repo.remove(id, 'owner-1'), true);
    },
  },
  addDirect: {
    has: (repo) => repo.addDirect !== undefined,
    run: async (repo, id) =>
      assert.equal((await repo.addDirect?.(id, CLAIM, { fingerprint: 'fp' }))?.added, true),
  },
  'addDirect (lazy mark)': {
    has: (repo) => repo.addDirect !== undefined,
    run: async (repo, id) =>
      assert.equal((await repo.addDirect?.(id, MARK, { fingerprint: 'fp' }))?.added, true),
  },
  markDirect: {
    has: (repo) => repo.markDirect !== undefined,
    run: async (repo, id) => assert.equal(await repo.markDirect?.({ id, fingerprint: 'fp' }, MARK), true),
  },
  confirmDirect: {
    has: (repo) => repo.confirmDirect !== undefined,
    run: async (repo, id) => {
      await repo.add(id, CLAIM, { fingerprint: 'fp' });
      assert.equal(
        await repo.confirmDirect?.({ id, owner: 'owner-1' }, { ttlMs: LONG_TTL_MS, result: 'r' }),
        true,
      );
    },
  },
  removeDirect: {
    absent: true,
    has: (repo) => repo.removeDirect !== undefined,
    run: async (repo, id) => {
      await repo.add(id, CLAIM);
      assert.equal(await repo.removeDirect?.(id, 'owner-1'), true);
    },
  },
};

/**
 * The rules that keep a store's verbs one family and catch a wrapper that forgets one: every single-key fast path
 * answers what its async verb answers, and on a persistent store a write through any verb survives a reopen.
 */
export function verbTests(suite: ContractSuite): void {
  const { options } = suite;
  const test = repoTest(suite);
  test('every single-key fast path answers what its async verb answers', async (repo: FastPath) => {
    const [a, b] = [uniqueId('async'), uniqueId('direct')];
    // add / addDirect: a claim, then a duplicate of it.
    if (repo.addDirect) {
      const viaAsync = await repo.add(a, CLAIM, { fingerprint: 'fp' });
      const viaDirect = await repo.addDirect(b, CLAIM, { fingerprint: 'fp' });
      assert.deepEqual(
        { added: viaDirect.added, record: shape(viaDirect.added ? viaDirect.record : undefined) },
        { added: viaAsync.added, record: shape(viaAsync.added ? viaAsync.record : undefined) },
        'addDirect of a new id',
      );
      const againAsync = await repo.add(a, CLAIM);
      const againDirect = await repo.addDirect(b, CLAIM);
      assert.deepEqual(
        shape(againDirect.added ? undefined : againDirect.existing),
        shape(againAsync.added ? undefined : againAsync.existing),
        'addDirect of a held id',
      );
    } else {
      await repo.add(a, CLAIM, { fingerprint: 'fp' });
      await repo.add(b, CLAIM, { fingerprint: 'fp' });
    }
    // get / getDirect: the records the async verb reads, seen through the fast path.
    if (repo.getDirect) {
      assert.deepEqual(shape(await repo.getDirect(b)), shape(await repo.get(a)), 'getDirect of a claim');
      assert.deepEqual(shape(await repo.getDirect(b)), shape(await repo.get(b)), 'getDirect and get agree');
      assert.equal(await repo.getDirect(uniqueId('none')), undefined, 'getDirect of an absent id');
    }
    // confirm / confirmDirect: another owner changes nothing, the owner confirms.
    if (repo.confirmDirect) {
      const other = { ttlMs: LONG_TTL_MS };
      assert.equal(
        await repo.confirmDirect({ id: b, owner: 'owner-2' }, other),
        await repo.confirm({ id: a, owner: 'owner-2' }, other),
        'confirmDirect by another owner',
      );
      assert.equal(
        await repo.confirmDirect({ id: b, owner: 'owner-1' }, { ttlMs: LONG_TTL_MS, result: 'r' }),
        await repo.confirm({ id: a, owner: 'owner-1' }, { ttlMs: LONG_TTL_MS, result: 'r' }),
        'confirmDirect by the owner',
      );
      assert.deepEqual(shape(await repo.get(b)), shape(await repo.get(a)), 'the confirmed records');
    }
    // remove / removeDirect: by another owner, then without an owner.
    if (repo.removeDirect) {
      const [c, d] = [uniqueId('async-rm'), uniqueId('direct-rm')];
      await repo.add(c, CLAIM);
      await repo.add(d, CLAIM);
      assert.equal(
        await repo.removeDirect(d, 'owner-2'),
        await repo.remove(c, 'owner-2'),
        'by another owner',
      );
      assert.equal(await repo.removeDirect(d, 'owner-1'), await repo.remove(c, 'owner-1'), 'by the owner');
      assert.equal(await repo.removeDirect(d), await repo.remove(c), 'of an absent id');
      assert.equal(await repo.get(d), undefined);
    }
    // markDirect / markMany of one entry: a new id, then the same id again.
    if (repo.markDirect) {
      const [e, f] = [uniqueId('async-mark'), uniqueId('direct-mark')];
      assert.equal(
        await repo.markDirect({ id: f, fingerprint: 'fp' }, MARK),
        await markAsync(repo, { id: e, fingerprint: 'fp' }),
      );
      assert.deepEqual(shape(await repo.get(f)), shape(await repo.get(e)), 'the marked records');
      assert.equal(await repo.markDirect({ id: f }, MARK), await markAsync(repo, { id: e }), 'a held id');
    }
  });

  test(
    'a write through every verb, fast paths included, is held after a reopen',
    whenPersistent(options),
    async (first, ctx) => {
      const written: { verb: string; id: string; expected: Record<string, unknown> | undefined }[] = [];
      for (const [verb, write] of Object.entries(WRITES)) {
        if (write.has && !write.has(first)) continue;
        const id = uniqueId(verb.replace(/\W+/g, '-'));
        await write.run(first, id);
        const expected = shape(await first.get(id));
        assert.equal(expected === undefined, write.absent === true, `${verb}: the record as written`);
        written.push({ verb, id, expected });
      }
      await first.close();
      const reopened = await ctx.open();
      // Every verb is checked before the test fails, so the message names each one whose write was lost.
      const lost: string[] = [];
      for (const { verb, id, expected } of written) {
        const actual = shape(await reopened.get(id));
        if (!isDeepStrictEqual(actual, expected))
          lost.push(`${verb} (wrote ${JSON.stringify(expected)}, reopened ${JSON.stringify(actual)})`);
      }
      assert.deepEqual(
        lost,
        [],
        `writes lost at the reopen, by verb: ${lost.map((l) => l.split(' ')[0]).join(', ')}`,
      );
    },
  );
}
