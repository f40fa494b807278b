// Not a *.test.ts file: run only by catches-broken.test.ts, which expects this suite to FAIL.
import { repositoryContract } from '../index.js';
import { BrokenRepository } from './broken-repository.js';

repositoryContract({
  name: 'broken',
  factory: async ({ namespace }) => new BrokenRepository(namespace),
  capabilities: {
    persistent: false,
    shared: false,
    maxIdBytes: 1024,
    nativeBatch: false,
    maxResultBytes: 1_048_576,
  },
});
