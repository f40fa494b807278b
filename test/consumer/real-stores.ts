import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/** A store for consumer tests, opened fresh per test and closed (and emptied) after it. */
export interface TestStore {
  readonly name: string;
  readonly skip: false | string;
  readonly open: (t: TestContext) => Promise<IdempotentRepository>;
}

/** Memory, the embedded RocksDB and a real Redis: where the consumer's stored outcomes must behave alike. */
export const testStores: readonly TestStore[] = [
  { name: 'memory', skip: false, open: async () => new MemoryRepository() },
  {
    name: 'rocksdb',
    skip: skipUnlessEnabled('rocksdb'),
    open: async (t) => {
      const dir = await mkdtemp(join(tmpdir(), 'idem-results-'));
      const repository = await RocksdbRepository.open({ path: join(dir, 'store') });
      t.after(async () => {
        await repository.close();
        await rm(dir, { recursive: true, force: true });
      });
      return repository;
    },
  },
  {
    name: 'redis',
    skip: skipUnlessEnabled('redis'),
    open: async (t) => {
      const repository = await RedisRepository.open({
        url: endpoints.redisUrl,
        keyPrefix: `idem-test:results:${randomUUID()}:`,
      });
      t.after(async () => {
        await repository.clear();
        await repository.close();
      });
      return repository;
    },
  },
];

/** Both processing-time modes: every stored-outcome rule holds in each. */
export const modes = ['eager', 'lazy'] as const;
