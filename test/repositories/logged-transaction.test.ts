import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ContractContext, type ContractOptions } from '../../src/contract/context.js';
import { RepositoryError } from '../../src/errors.js';
import { LoggedRepository, MemoryChangelog } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { claimTests } from '../contract/index.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const TTL = { ttlMs: 60_000 };

const inners: { name: string; skip?: string | false; open(): Promise<IdempotentRepository> }[] = [
  { name: 'memory', open: async () => new MemoryRepository() },
  {
    name: 'rocksdb',
    skip: skipUnlessEnabled('rocksdb'),
    open: async () => {
      const dir = await mkdtemp(join(tmpdir(), 'idem-logged-tx-'));
      const store = await RocksdbRepository.open({ path: join(dir, 'store') });
      const close = store.close.bind(store);
      store.close = async () => {
        await close();
        await rm(dir, { recursive: true, force: true });
      };
      return store;
    },
  },
];

for (const { name, skip, open } of inners) {
  describe(`logged store transactions over ${name}`, { skip: skip ?? false }, () => {
    it('stages every write verb: reads see the staged changes, the inner store and the log do not', async () => {
      const inner = await open();
      const log = new MemoryChangelog();
      const store = new LoggedRepository(inner, log);
      try {
        await store.markMany([{ id: 'held' }], TTL);
        store.begin();
        assert.deepEqual(await store.markMany([{ id: 'a' }, { id: 'held' }, { id: 'a' }], TTL), [
          true,
          false,
          true,
        ]);
        assert.equal(await store.markDirect({ id: 'b' }, TTL), true);
        assert.equal((await store.addDirect('c', TTL)).added, true);
        assert.equal((await store.add('c', TTL)).added, false, 'a staged record is live');
        assert.equal((await store.add('d', { ...TTL, leaseMs: 30_000, owner: 'o' })).added, true);
        assert.equal(await store.confirmDirect({ id: 'd', owner: 'o' }, TTL), true);
        assert.equal(await store.removeDirect('held'), true);
        assert.equal(await store.contains('held'), false, 'a staged removal hides the inner record');
        assert.equal((await store.getDirect('d'))?.state, 'confirmed');
        assert.deepEqual(
          store.staged().map((c) => [c.key, c.record?.state]),
          [
            ['a', 'confirmed'],
            ['b', 'confirmed'],
            ['c', 'confirmed'],
            ['d', 'in-flight'],
            ['d', 'confirmed'],
            ['held', undefined],
          ],
        );
        assert.deepEqual(await inner.containsMany(['a', 'b', 'c', 'd']), [false, false, false, false]);
        assert.equal(await inner.contains('held'), true);
        assert.equal(log.changes.length, 1, 'only the mark made outside the transaction was appended');
        await store.commit();
        assert.equal(store.inTransaction, false);
        assert.deepEqual(await inner.containsMany(['a', 'b', 'c', 'd', 'held']), [
          true,
          true,
          true,
          true,
          false,
        ]);
        assert.equal((await inner.get('d'))?.state, 'confirmed');
      } finally {
        await store.close();
      }
    });

    it('a rollback drops the staged changes: the inner store never saw them', async () => {
      const inner = await open();
      const store = new LoggedRepository(inner, new MemoryChangelog());
      try {
        store.begin();
        await store.markMany([{ id: 'x' }], TTL);
        await store.markDirect({ id: 'y' }, TTL);
        store.rollback();
        assert.deepEqual(await store.containsMany(['x', 'y']), [false, false]);
        assert.deepEqual(await inner.containsMany(['x', 'y']), [false, false]);
        assert.throws(() => {
          store.begin();
          store.begin();
        }, /already open/);
      } finally {
        await store.close();
      }
    });

    it('outside a transaction, a write the changelog refuses is undone and rejects', async () => {
      const inner = await open();
      const log = new MemoryChangelog();
      const store = new LoggedRepository(inner, log);
      try {
        log.failing = new Error('broker away');
        await assert.rejects(store.markMany([{ id: 'm' }], TTL), RepositoryError);
        await assert.rejects(Promise.resolve(store.markDirect({ id: 'n' }, TTL)), RepositoryError);
        await assert.rejects(store.add('o', { ...TTL, leaseMs: 1_000, owner: 'w' }), RepositoryError);
        assert.deepEqual(await inner.containsMany(['m', 'n', 'o']), [false, false, false]);
        log.failing = undefined;
        assert.equal(await store.markDirect({ id: 'n' }, TTL), true);
        assert.deepEqual(
          log.changes.map((c) => c.key),
          ['n'],
        );
      } finally {
        await store.close();
      }
    });

    // The node's exactly-once chunks write inside a transaction: the contract's claims hold there too.
    describe('the contract’s claims inside a transaction', () => {
      const options: ContractOptions = {
        name: `logged ${name} in a transaction`,
        factory: async () => {
          const store = new LoggedRepository(await open(), new MemoryChangelog());
          store.begin();
          return store;
        },
        // Not persistent: a transaction never committed leaves nothing behind.
        capabilities: {
          persistent: false,
          shared: false,
          maxIdBytes: 1024,
          nativeBatch: true,
          maxResultBytes: 1_048_576,
        },
      };
      claimTests({
        it,
        options,
        withContext: (fn) => async () => {
          const ctx = new ContractContext(options);
          try {
            await fn(ctx);
          } finally {
            await ctx.dispose();
          }
        },
      });
    });
  });
}
