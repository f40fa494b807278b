import { describe } from 'node:test';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { repositoryContract } from '../contract/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

describe('redis', { skip: skipUnlessEnabled('redis') }, () => {
  repositoryContract({
    name: 'redis',
    factory: async ({ namespace }) =>
      RedisRepository.open({ url: endpoints.redisUrl, keyPrefix: `idem-test:${namespace}:` }),
    capabilities: {
      persistent: true,
      shared: true,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});
