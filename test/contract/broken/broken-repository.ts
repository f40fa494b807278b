import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../../../src/store/base.js';
import { newRecord } from '../../../src/store/record.js';
import type {
  AddOptions,
  AddResult,
  IdempotencyRecord,
  RepositoryCapabilities,
} from '../../../src/store/types.js';

/** Every broken repository's records, as on one shared server. */
const server = new Map<string, IdempotencyRecord>();

/**
 * A deliberately wrong store, to prove the contract suite catches bad implementations:
 * its add is check-then-act across an await (not atomic), it never expires anything,
 * confirm/remove ignore the owner (and confirm drops the result and takes its own time for the first-seen
 * time), and its namespace is a bare key prefix (so `ns` sees and clears `ns:orders`).
 */
export class BrokenRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: false,
    shared: false,
    maxIdBytes: 1024,
    nativeBatch: false,
    maxResultBytes: 1_048_576,
  };
  protected readonly storeName = 'broken';
  readonly #prefix: string;

  constructor(namespace: string) {
    super();
    this.#prefix = `${namespace}:`;
  }

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    const results: AddResult[] = [];
    for (const entry of entries) {
      const existing = server.get(this.#prefix + entry.key);
      await new Promise((resolve) => setImmediate(resolve)); // the race window
      if (existing) {
        results.push({ added: false, existing });
        continue;
      }
      const record = newRecord(entry.key, entry, options, now);
      server.set(this.#prefix + entry.key, record);
      results.push({ added: true, record });
    }
    return results;
  }

  protected async doGetMany(keys: readonly string[]): Promise<(IdempotencyRecord | undefined)[]> {
    return keys.map((key) => server.get(this.#prefix + key));
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]> {
    return claims.map(({ key }) => {
      const record = server.get(this.#prefix + key);
      if (!record) return false;
      server.set(this.#prefix + key, {
        ...record,
        state: 'confirmed',
        expiresAt: now + ttlMs,
        firstSeenAt: now,
      });
      return true;
    });
  }

  protected async doRemove(key: string): Promise<boolean> {
    return server.delete(this.#prefix + key);
  }

  protected async doClear(): Promise<void> {
    for (const key of server.keys()) if (key.startsWith(this.#prefix)) server.delete(key);
  }

  protected async doClose(): Promise<void> {}
}
