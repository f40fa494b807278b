import { LRUCache } from 'lru-cache';
import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../base.js';
import { MAX_ID_BYTES } from '../ids.js';
import { confirmedRecord, isLive, newRecord } from '../record.js';
import type { AddOptions, AddResult, IdempotencyRecord, RepositoryCapabilities } from '../types.js';
import { type MemoryRepositoryOptions, memoryOptionsSchema } from './options.js';

/**
 * In-process store for tests and small jobs: a bounded LRU map. Expiry is checked on every read against the
 * record's own times, so a record past its TTL is absent even before the LRU drops it.
 */
export class MemoryRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: false,
    shared: false,
    maxIdBytes: MAX_ID_BYTES,
    nativeBatch: true,
  };
  protected readonly storeName = 'memory';
  readonly #records: LRUCache<string, IdempotencyRecord>;

  constructor(options: MemoryRepositoryOptions = {}) {
    super(options);
    const { maxEntries } = memoryOptionsSchema.parse({ maxEntries: options.maxEntries });
    this.#records = new LRUCache({ max: maxEntries });
  }

  /** Number of records held, live or not yet swept. */
  get size(): number {
    return this.#records.size;
  }

  // The single-key path skips the batch arrays: it is the wrapper's hot path.
  protected override async doAdd(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    return this.addOne(entry, options, now);
  }

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    return entries.map((entry) => this.addOne(entry, options, now));
  }

  private addOne(entry: KeyedEntry, options: AddOptions, now: number): AddResult {
    const existing = this.#records.get(entry.key);
    if (existing !== undefined && isLive(existing, now)) return { added: false, existing };
    const record = newRecord(entry.key, entry, options, now);
    this.#records.set(entry.key, record);
    return { added: true, record };
  }

  protected async doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    return keys.map((key) => {
      const record = this.#records.peek(key);
      return record !== undefined && isLive(record, now) ? record : undefined;
    });
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]> {
    return claims.map(({ key, owner }) => {
      const record = this.#records.peek(key);
      if (record === undefined || record.state !== 'in-flight' || record.owner !== owner) return false;
      this.#records.set(key, confirmedRecord(record, ttlMs, now));
      return true;
    });
  }

  protected async doRemove(key: string, owner: string | undefined, _now: number): Promise<boolean> {
    const record = this.#records.peek(key);
    if (record === undefined) return false;
    if (owner !== undefined && (record.state !== 'in-flight' || record.owner !== owner)) return false;
    return this.#records.delete(key);
  }

  protected async doClear(): Promise<void> {
    this.#records.clear();
  }

  protected async doClose(): Promise<void> {
    this.#records.clear();
  }
}
