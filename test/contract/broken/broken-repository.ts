import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../../../src/repositories/base.js';
import { newRecord } from '../../../src/repositories/record.js';
import type {
  AddOptions,
  AddResult,
  IdempotencyRecord,
  RepositoryCapabilities,
} from '../../../src/repositories/types.js';

/**
 * A deliberately wrong store, to prove the contract suite catches bad implementations:
 * its add is check-then-act across an await (not atomic), it never expires anything,
 * and confirm/remove ignore the owner.
 */
export class BrokenRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: false,
    shared: false,
    maxIdBytes: 1024,
    nativeBatch: false,
  };
  protected readonly storeName = 'broken';
  readonly #records = new Map<string, IdempotencyRecord>();

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    const results: AddResult[] = [];
    for (const entry of entries) {
      const existing = this.#records.get(entry.key);
      await new Promise((resolve) => setImmediate(resolve)); // the race window
      if (existing) {
        results.push({ added: false, existing });
        continue;
      }
      const record = newRecord(entry.key, entry, options, now);
      this.#records.set(entry.key, record);
      results.push({ added: true, record });
    }
    return results;
  }

  protected async doGetMany(keys: readonly string[]): Promise<(IdempotencyRecord | undefined)[]> {
    return keys.map((key) => this.#records.get(key));
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]> {
    return claims.map(({ key }) => {
      const record = this.#records.get(key);
      if (!record) return false;
      this.#records.set(key, { ...record, state: 'confirmed', expiresAt: now + ttlMs });
      return true;
    });
  }

  protected async doRemove(key: string): Promise<boolean> {
    return this.#records.delete(key);
  }

  protected async doClear(): Promise<void> {
    this.#records.clear();
  }

  protected async doClose(): Promise<void> {}
}
