import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe } from 'node:test';
import { LoggedRepository, MemoryChangelog } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import { repositoryContract } from '../contract/index.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

/*
 * The logged store runs the whole contract as a persistent store whose persistence is its changelog alone: each
 * open builds a new, empty inner store and restores it from the namespace's changelog. A write that reached the
 * inner store but not the log (a forgotten verb) is lost at the reopen, and the contract's reopen tests fail.
 */
const changelogs = new Map<string, MemoryChangelog>();
function changelogOf(namespace: string): MemoryChangelog {
  let log = changelogs.get(namespace);
  if (!log) {
    log = new MemoryChangelog();
    changelogs.set(namespace, log);
  }
  return log;
}

async function reopened(inner: ConstructorParameters<typeof LoggedRepository>[0], namespace: string) {
  const log = changelogOf(namespace);
  const repository = new LoggedRepository(inner, log, {
    capabilities: { ...inner.capabilities, persistent: true },
  });
  await repository.restore(log.changes);
  return repository;
}

describe('logged over memory (local record access)', () => {
  repositoryContract({
    name: 'logged memory',
    factory: ({ namespace }) => reopened(new MemoryRepository(), `memory/${namespace}`),
    capabilities: {
      persistent: true,
      shared: false,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});

// RocksDB has no local record access: writes, undo and restore go through its verbs (the node's setup).
const root = join(tmpdir(), `idem-logged-contract-${process.pid}`);
let opened = 0;
describe('logged over rocksdb (through the store verbs)', { skip: skipUnlessEnabled('rocksdb') }, () => {
  after(() => rm(root, { recursive: true, force: true }));
  repositoryContract({
    name: 'logged rocksdb',
    factory: async ({ namespace }) =>
      reopened(
        await RocksdbRepository.open({ path: join(root, `${namespace}-${opened++}`) }),
        `rocksdb/${namespace}`,
      ),
    capabilities: {
      persistent: true,
      shared: false,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});
