import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe } from 'node:test';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import { repositoryContract } from '../contract/index.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const capabilities = {
  persistent: true,
  shared: false,
  maxIdBytes: 1024,
  nativeBatch: true,
  maxResultBytes: 1_048_576,
};

// One directory per contract namespace, so reopening a namespace reaches the same data.
const root = join(tmpdir(), `idem-rocksdb-contract-${process.pid}`);

describe('rocksdb', { skip: skipUnlessEnabled('rocksdb') }, () => {
  after(() => rm(root, { recursive: true, force: true }));

  repositoryContract({
    name: 'rocksdb',
    factory: ({ namespace }) => RocksdbRepository.open({ path: join(root, namespace) }),
    capabilities,
  });

  // The periodic key index snapshot (indexSnapshotKeys) is saved between operations; saved as often as it can
  // be, nothing the contract asks may change.
  repositoryContract({
    name: 'rocksdb, key index saved after every id',
    factory: ({ namespace }) =>
      RocksdbRepository.open({ path: join(root, `snapshots-${namespace}`), indexSnapshotKeys: 1 }),
    capabilities,
  });
});
