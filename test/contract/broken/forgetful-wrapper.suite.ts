// Not a *.test.ts file: run only by catches-broken.test.ts, which expects this suite to FAIL.
import { LoggedRepository, MemoryChangelog } from '../../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import type {
  AddEntry,
  AddOptions,
  AddResult,
  MarkOptions,
  MaybePromise,
  MessageId,
} from '../../../src/store/types.js';
import { repositoryContract } from '../index.js';

/**
 * The defect of the exactly-once node's old staging proxy (issue 17): a wrapper that logs the async write verbs
 * but lets the single-key fast paths reach the inner store directly, so those writes never reach its log.
 */
class ForgetfulWrapper extends LoggedRepository {
  override addDirect(
    id: MessageId,
    options: AddOptions,
    entry?: Omit<AddEntry, 'id'>,
  ): MaybePromise<AddResult> {
    return (this.inner as MemoryRepository).addDirect(id, options, entry);
  }
  override markDirect(entry: AddEntry, options: MarkOptions): MaybePromise<boolean> {
    return (this.inner as MemoryRepository).markDirect(entry, options);
  }
}

const logs = new Map<string, MemoryChangelog>();

repositoryContract({
  name: 'forgetful wrapper',
  factory: async ({ namespace }) => {
    let log = logs.get(namespace);
    if (!log) {
      log = new MemoryChangelog();
      logs.set(namespace, log);
    }
    const inner = new MemoryRepository();
    const repository = new ForgetfulWrapper(inner, log, {
      capabilities: { ...inner.capabilities, persistent: true },
    });
    await repository.restore(log.changes);
    return repository;
  },
  capabilities: {
    persistent: true,
    shared: false,
    maxIdBytes: 1024,
    nativeBatch: true,
    maxResultBytes: 1_048_576,
  },
});
