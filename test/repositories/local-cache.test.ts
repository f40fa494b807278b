import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { withLocalCache } from '../../src/repositories/local-cache.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { repositoryContract } from '../contract/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

// The cache must not change a single answer of the store behind it: the whole contract runs through it.
repositoryContract({
  name: 'memory behind a local cache',
  factory: async () => withLocalCache(new MemoryRepository(), { maxEntries: 50 }),
  capabilities: new MemoryRepository().capabilities,
});

describe('redis behind a local cache', { skip: skipUnlessEnabled('redis') }, () => {
  repositoryContract({
    name: 'redis behind a local cache',
    factory: async ({ namespace }) =>
      withLocalCache(
        await RedisRepository.open({ url: endpoints.redisUrl, keyPrefix: `idem-test:cache:${namespace}:` }),
      ),
    capabilities: {
      persistent: true,
      shared: true,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});

/** A real memory store that counts the reads reaching it. */
class CountingMemory extends MemoryRepository {
  reads = 0;
  override getMany(...args: Parameters<MemoryRepository['getMany']>) {
    this.reads++;
    return super.getMany(...args);
  }
  override add(...args: Parameters<MemoryRepository['add']>) {
    this.reads++;
    return super.add(...args);
  }
}

describe('local cache', () => {
  it('answers a repeated duplicate, with its kept result, without a store round trip', async () => {
    const store = new CountingMemory();
    const cached = withLocalCache(store);
    const consumer = new IdempotentConsumer<{ id: string }>({
      repository: cached,
      id: 'id',
      ttlMs: 60_000,
      storeResult: true,
    });
    const first = await consumer.process({ id: 'a' }, () => 'charged');
    assert.equal(first.outcome, 'processed');
    const second = await consumer.process({ id: 'a' }, () => assert.fail('ran twice'));
    assert.equal(second.outcome, 'duplicate');
    const readsAfterSecond = store.reads;
    const third = await consumer.process({ id: 'a' }, () => assert.fail('ran twice'));
    assert.equal(third.outcome, 'duplicate');
    assert.equal(third.result, 'charged');
    assert.equal(store.reads, readsAfterSecond, 'the third lookup reached the store');
    assert.ok(cached.hits >= 1);
    await cached.close();
  });

  it('never caches a claim: an in-flight id is asked of the store each time', async () => {
    const store = new CountingMemory();
    const cached = withLocalCache(store);
    await cached.add('x', { ttlMs: 60_000, leaseMs: 60_000, owner: 'o' });
    const before = store.reads;
    const again = await cached.add('x', { ttlMs: 60_000, leaseMs: 60_000, owner: 'p' });
    assert.equal(again.added, false);
    assert.equal(store.reads, before + 1);
    await cached.close();
  });

  it('refuses a bad option by name', () => {
    assert.throws(
      () => withLocalCache(new MemoryRepository(), { maxEntries: 0 }),
      /maxEntries[\s\S]*withLocalCache/,
    );
  });
});
