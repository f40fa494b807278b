import { z } from 'zod';
import { RenewUnsupportedError } from '../errors.js';
import { parseOptions } from '../options/issues.js';
import { toKey } from '../store/ids.js';
import { isLive, newRecord } from '../store/record.js';
import type {
  AddEntry,
  AddOptions,
  AddResult,
  ClaimRef,
  ConfirmOptions,
  ConfirmRef,
  IdempotencyRecord,
  IdempotentRepository,
  MarkOptions,
  MessageId,
  ReadOptions,
  RenewOptions,
  RepositoryCapabilities,
} from '../store/types.js';

/** Options of {@link withLocalCache}. */
export interface LocalCacheOptions {
  /** Confirmed records kept in this process, least recently used dropped first. Default 10,000. */
  readonly maxEntries?: number;
  /** Clock in epoch ms that cached records are judged against when a call gives no `now`. Defaults to `Date.now`. */
  readonly clock?: () => number;
}

const localCacheSchema = z.strictObject({
  maxEntries: z.number().int().positive().optional(),
  clock: z.function().optional(),
});

/**
 * A store with an in-process cache of confirmed records in front of it, as Powertools' `useLocalCache`: a
 * duplicate seen recently is answered without a store round trip.
 *
 * Only confirmed records are cached, and only as the store returned them (or as this process marked them), so a
 * cached answer is one the store gave: the id stays a duplicate until the record's `expiresAt`, judged by this
 * process's clock. Claims (in-flight records) always go to the store, so the atomic claim is untouched. What the
 * cache cannot see is another process removing or clearing a confirmed id; this process keeps answering
 * "duplicate" for it until the record expires or falls out of the cache. `remove` and `clear` through this
 * wrapper drop the cached entries.
 */
export class LocalCacheRepository implements IdempotentRepository {
  readonly capabilities: RepositoryCapabilities;
  readonly #inner: IdempotentRepository;
  /** The inner store's `scan`, when it has one (see `IdempotentRepository.scan`). */
  readonly scan?: IdempotentRepository['scan'];
  readonly #maxEntries: number;
  readonly #clock: () => number;
  /** Canonical key → confirmed record; Map order is recency (oldest first). */
  readonly #records = new Map<string, IdempotencyRecord>();
  /** Cache hits and store lookups avoided, for tests and metrics. */
  hits = 0;

  constructor(inner: IdempotentRepository, options: LocalCacheOptions = {}) {
    const parsed = parseOptions(localCacheSchema, options, {
      kind: 'code',
      owner: 'withLocalCache(...)',
    }) as LocalCacheOptions;
    this.#inner = inner;
    // A read of the inner store's records: nothing to log or cache. Present only where the inner store has it.
    if (inner.scan !== undefined) {
      const scan = inner.scan.bind(inner);
      this.scan = async (onPage) => {
        return scan(onPage);
      };
    }
    this.capabilities = inner.capabilities;
    this.#maxEntries = parsed.maxEntries ?? 10_000;
    this.#clock = parsed.clock ?? Date.now;
  }

  async add(id: MessageId, options: AddOptions, entry?: Omit<AddEntry, 'id'>): Promise<AddResult> {
    const cached = this.#lookup(this.#key(id), options.now);
    if (cached !== undefined) return { added: false, existing: cached };
    const result = await this.#inner.add(id, options, entry);
    if (!result.added) this.#remember(result.existing);
    return result;
  }

  async addMany(entries: readonly AddEntry[], options: AddOptions): Promise<AddResult[]> {
    const answers = new Array<AddResult | undefined>(entries.length);
    const misses: AddEntry[] = [];
    const at: number[] = [];
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as AddEntry;
      const cached = this.#lookup(this.#key(entry.id), options.now);
      if (cached !== undefined) answers[i] = { added: false, existing: cached };
      else {
        misses.push(entry);
        at.push(i);
      }
    }
    if (misses.length > 0) {
      const results = await this.#inner.addMany(misses, options);
      for (let k = 0; k < results.length; k++) {
        const result = results[k] as AddResult;
        if (!result.added) this.#remember(result.existing);
        answers[at[k] as number] = result;
      }
    }
    return answers as AddResult[];
  }

  async markMany(entries: readonly AddEntry[], options: MarkOptions): Promise<boolean[]> {
    const marked = this.#inner.markMany
      ? await this.#inner.markMany(entries, options)
      : (await this.#inner.addMany(entries, options)).map((r) => r.added);
    const now = options.now ?? this.#clock();
    const seen = new Set<string>();
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as AddEntry;
      const key = this.#key(entry.id);
      // A repeat inside the list shares the first occurrence's record, as the store resolved it.
      if (seen.has(key)) continue;
      seen.add(key);
      // The record this process just wrote, confirmed: the store holds the same until it expires.
      if (marked[i]) this.#remember(newRecord(key, entry, { ttlMs: options.ttlMs }, now));
    }
    return marked;
  }

  async contains(id: MessageId, options?: ReadOptions): Promise<boolean> {
    return (await this.get(id, options)) !== undefined;
  }

  async containsMany(ids: readonly MessageId[], options?: ReadOptions): Promise<boolean[]> {
    return (await this.getMany(ids, options)).map((record) => record !== undefined);
  }

  async get(id: MessageId, options?: ReadOptions): Promise<IdempotencyRecord | undefined> {
    const [record] = await this.getMany([id], options);
    return record;
  }

  async getMany(
    ids: readonly MessageId[],
    options?: ReadOptions,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    const answers = new Array<IdempotencyRecord | undefined>(ids.length);
    const misses: MessageId[] = [];
    const at: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const cached = this.#lookup(this.#key(ids[i] as MessageId), options?.now);
      if (cached !== undefined) answers[i] = cached;
      else {
        misses.push(ids[i] as MessageId);
        at.push(i);
      }
    }
    if (misses.length > 0) {
      const records = await this.#inner.getMany(misses, options);
      for (let k = 0; k < records.length; k++) {
        const record = records[k];
        if (record !== undefined) this.#remember(record);
        answers[at[k] as number] = record;
      }
    }
    return answers;
  }

  // A confirm is not cached here: the confirmed record's times are the store's; the next read caches it.
  confirm(claim: ClaimRef, options: ConfirmOptions): Promise<boolean> {
    return this.#inner.confirm(claim, options);
  }

  confirmMany(claims: readonly ConfirmRef[], options: { ttlMs: number }): Promise<boolean[]> {
    return this.#inner.confirmMany(claims, options);
  }

  /** The inner store's `renew` (the cache keeps only confirmed records, so a claim is never cached). */
  async renew(claim: ClaimRef, options: RenewOptions): Promise<boolean> {
    if (this.#inner.renew === undefined) {
      throw new RenewUnsupportedError(
        'the repository behind the local cache cannot renew a lease (no renew)',
      );
    }
    return this.#inner.renew(claim, options);
  }

  async remove(id: MessageId, owner?: string): Promise<boolean> {
    if (owner === undefined) this.#records.delete(this.#key(id));
    return this.#inner.remove(id, owner);
  }

  async clear(): Promise<void> {
    this.#records.clear();
    await this.#inner.clear();
  }

  async close(): Promise<void> {
    this.#records.clear();
    await this.#inner.close();
  }

  #key(id: MessageId): string {
    return toKey(id, this.capabilities.maxIdBytes);
  }

  /** The cached confirmed record, when it is still live at `now`; a dead one is dropped. */
  #lookup(key: string, now: number | undefined): IdempotencyRecord | undefined {
    const record = this.#records.get(key);
    if (record === undefined) return undefined;
    this.#records.delete(key);
    if (!isLive(record, now ?? this.#clock())) return undefined;
    this.#records.set(key, record);
    this.hits++;
    return record;
  }

  /** Keeps a confirmed record as the most recently used; in-flight records are never cached. */
  #remember(record: IdempotencyRecord): void {
    if (record.state !== 'confirmed') return;
    this.#records.delete(record.id);
    this.#records.set(record.id, record);
    if (this.#records.size > this.#maxEntries) {
      const oldest = this.#records.keys().next().value as string;
      this.#records.delete(oldest);
    }
  }
}

/** Puts an in-process cache of confirmed records in front of a store (see {@link LocalCacheRepository}). */
export function withLocalCache(
  repository: IdempotentRepository,
  options?: LocalCacheOptions,
): LocalCacheRepository {
  return new LocalCacheRepository(repository, options);
}
