import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { repositoryContract } from '../contract/index.js';

repositoryContract({
  name: 'memory',
  factory: async () => new MemoryRepository(),
  capabilities: {
    persistent: false,
    shared: false,
    maxIdBytes: 1024,
    nativeBatch: true,
    maxResultBytes: 1_048_576,
  },
});
