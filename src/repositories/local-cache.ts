import { z } from 'zod';
import { RenewUnsupportedError } from '../errors.js';
import { parseOptions } from '../options/issues.js';
import { BaseRepository, entryOf, type KeyedClaim, type KeyedEntry } from '../store/base.js';
import { idOfKey } from '../store/ids.js';
import { markIds } from '../store/mark.js';
import { isLive, newRecord } from '../store/record.js';
import type {
  AddOptions,
  AddResult,
  IdempotencyRecord,
  IdempotentRepository,
  MarkOptions,
  RepositoryCapabilities,
} from '../store/types.js';

/** Options of {@link withLocalCache}. */
export interface LocalCacheOptions {
  /** Confirmed records kept in this process, least recently used dropped first. Default 10,000. */
  readonly maxEntries?: number;
  /** Clock in epoch ms that cached records are judged against when a call gives no `now`. Defaults to the inner store's. */
  readonly clock?: () => number;
}

const localCacheSchema = z.strictObject({
  maxEntries: z.number().int().positive().optional(),
  clock: z.function().optional(),
});

/**
 * A store with an in-process cache of confirmed records in front of it, as Powertools' `useLocalCache`: a recent
 * duplicate is answered without a round trip. Only confirmed records are cached, as the store returned them (or
 * this process marked them), until their `expiresAt`; claims always go to the store. The cache cannot see another
 * process remove or clear a confirmed id: it answers "duplicate" until the record expires or is evicted.
 */
export class LocalCacheRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities;
  protected readonly storeName: string;
  readonly #inner: IdempotentRepository;
  readonly scan?: IdempotentRepository['scan'];
  readonly #maxEntries: number;
  /** Canonical key → confirmed record; Map order is recency (oldest first). */
  readonly #records = new Map<string, IdempotencyRecord>();
  /** Cache hits and store lookups avoided, for tests and metrics. */
  hits = 0;

  constructor(inner: IdempotentRepository, options: LocalCacheOptions = {}) {
    const parsed = parseOptions(localCacheSchema, options, {
      kind: 'code',
      owner: 'withLocalCache(...)',
    }) as LocalCacheOptions;
    // The inner store's clock by default: a read passes the time it is judged at on to the inner store.
    super({ clock: parsed.clock ?? BaseRepository.clockOf(inner) });
    this.#inner = inner;
    if (inner.scan !== undefined) this.scan = inner.scan.bind(inner);
    this.capabilities = inner.capabilities;
    this.storeName = (inner as { storeName?: string }).storeName ?? 'local cache';
    this.#maxEntries = parsed.maxEntries ?? 10_000;
  }

  protected override async doAdd(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    const cached = this.#lookup(entry.key, now);
    if (cached !== undefined) return { added: false, existing: cached };
    const { key, ...fields } = entry;
    const result = await this.#inner.add(idOfKey(key), options, fields);
    if (!result.added) this.#remember(result.existing);
    return result;
  }

  protected async doAddMany(entries: readonly KeyedEntry[], options: AddOptions, now: number) {
    const answers = entries.map((e): AddResult | undefined => {
      const cached = this.#lookup(e.key, now);
      return cached === undefined ? undefined : { added: false, existing: cached };
    });
    const at = answers.flatMap((cached, i) => (cached === undefined ? [i] : []));
    if (at.length === 0) return answers as AddResult[];
    const missed = at.map((i) => entryOf(entries[i] as KeyedEntry));
    (await this.#inner.addMany(missed, options)).forEach((result, k) => {
      if (!result.added) this.#remember(result.existing);
      answers[at[k] as number] = result;
    });
    return answers as AddResult[];
  }

  protected override async doMarkMany(entries: readonly KeyedEntry[], options: MarkOptions, now: number) {
    const marked = await markIds(this.#inner, entries.map(entryOf), options);
    // The record this process just wrote, confirmed: the store holds the same until it expires.
    entries.forEach((entry, i) => {
      if (marked[i]) this.#remember(newRecord(entry.key, entry, { ttlMs: options.ttlMs }, now));
    });
    return marked;
  }

  protected async doGetMany(keys: readonly string[], now: number) {
    const answers = keys.map((key) => this.#lookup(key, now));
    const at = answers.flatMap((cached, i) => (cached === undefined ? [i] : []));
    if (at.length === 0) return answers;
    const ids = at.map((i) => idOfKey(keys[i] as string));
    (await this.#inner.getMany(ids, { now })).forEach((record, k) => {
      if (record !== undefined) this.#remember(record);
      answers[at[k] as number] = record;
    });
    return answers;
  }

  // A confirm is not cached here: the confirmed record's times are the store's; the next read caches it.
  protected override doConfirm({ key, owner, result }: KeyedClaim, ttlMs: number): Promise<boolean> {
    const options = result === undefined ? { ttlMs } : { ttlMs, result };
    return this.#inner.confirm({ id: idOfKey(key), owner }, options);
  }

  protected doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number): Promise<boolean[]> {
    const refs = claims.map(({ key, ...rest }) => ({ id: idOfKey(key), ...rest }));
    return this.#inner.confirmMany(refs, { ttlMs });
  }

  /** The inner store's `renew` (a claim is never cached). */
  protected override async doRenew(key: string, owner: string, leaseMs: number): Promise<boolean> {
    if (this.#inner.renew === undefined) {
      throw new RenewUnsupportedError(
        'the repository behind the local cache cannot renew a lease (no renew)',
      );
    }
    return this.#inner.renew({ id: idOfKey(key), owner }, { leaseMs });
  }

  protected async doRemove(key: string, owner: string | undefined): Promise<boolean> {
    if (owner === undefined) this.#records.delete(key);
    return this.#inner.remove(idOfKey(key), owner);
  }

  protected async doClear(): Promise<void> {
    this.#records.clear();
    await this.#inner.clear();
  }

  protected async doClose(): Promise<void> {
    this.#records.clear();
    await this.#inner.close();
  }

  /** The cached confirmed record, when it is still live at `now`; a dead one is dropped. */
  #lookup(key: string, now: number): IdempotencyRecord | undefined {
    const record = this.#records.get(key);
    if (record === undefined) return undefined;
    this.#records.delete(key);
    if (!isLive(record, now)) return undefined;
    this.#records.set(key, record);
    this.hits++;
    return record;
  }

  /** Keeps a confirmed record as the most recently used; in-flight records are never cached. */
  #remember(record: IdempotencyRecord): void {
    if (record.state !== 'confirmed') return;
    this.#records.delete(record.id);
    this.#records.set(record.id, record);
    if (this.#records.size > this.#maxEntries)
      this.#records.delete(this.#records.keys().next().value as string);
  }
}

/** Puts an in-process cache of confirmed records in front of a store (see {@link LocalCacheRepository}). */
export function withLocalCache(
  repository: IdempotentRepository,
  options?: LocalCacheOptions,
): LocalCacheRepository {
  return new LocalCacheRepository(repository, options);
}
