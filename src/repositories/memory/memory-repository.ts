import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../base.js';
import { MAX_ID_BYTES, toKey } from '../ids.js';
import { confirmedRecord, isLive, newRecord } from '../record.js';
import type {
  AddEntry,
  AddOptions,
  AddResult,
  ClaimRef,
  ConfirmOptions,
  IdempotencyRecord,
  MessageId,
  ReadOptions,
  RepositoryCapabilities,
} from '../types.js';
import { type MemoryRepositoryOptions, parseMemoryOptions } from './options.js';

/**
 * In-process store for tests and small jobs: a bounded LRU map. Expiry is checked on every read against the
 * record's own times, so a record past its TTL is absent even before the LRU drops it.
 *
 * The LRU is a plain Map kept in recency order (re-inserting moves a key to the end), rather than lru-cache:
 * this store is the wrapper benchmark's baseline, and the Map measured several times cheaper per message.
 * An evicted live id can repeat; size `maxEntries` above the ids seen within one TTL.
 */
export class MemoryRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: false,
    shared: false,
    maxIdBytes: MAX_ID_BYTES,
    nativeBatch: true,
    // Any string fits in memory; the cap bounds what `maxEntries` records can cost (1 MiB each at most).
    maxResultBytes: 1_048_576,
  };
  protected readonly storeName = 'memory';
  readonly #records = new Map<string, IdempotencyRecord>();
  readonly #maxEntries: number;

  constructor(options: MemoryRepositoryOptions = {}) {
    super(options);
    const { clock: _clock, ...rest } = options;
    this.#maxEntries = parseMemoryOptions(rest).maxEntries;
  }

  /** Number of records held, live or not yet swept. */
  get size(): number {
    return this.#records.size;
  }

  /**
   * The record stored under a canonical key, live or not. With {@link putRecord} and {@link deleteRecord}, this
   * lets a store that keeps its durable copy elsewhere (the `kafka` repository) use this map as its local index:
   * it replays records exactly as written and undoes a write its durable store refused.
   */
  peekRecord(key: string): IdempotencyRecord | undefined {
    return this.#records.get(key);
  }

  /** Stores a record as it is, under its own key, replacing what the key held (see {@link peekRecord}). */
  putRecord(record: IdempotencyRecord): void {
    this.#touch(record.id, record);
  }

  /** Forgets a canonical key (see {@link peekRecord}). */
  deleteRecord(key: string): boolean {
    return this.#records.delete(key);
  }

  /*
   * The single-key calls (every `wrap` call makes two) skip the base class's closure and extra async layer: this
   * store cannot fail, so there is no client error to wrap, only the id to check. Same checks, same answers.
   */
  override add(id: MessageId, options: AddOptions, entry: Omit<AddEntry, 'id'> = {}): Promise<AddResult> {
    try {
      this.assertOpen();
      return Promise.resolve(
        this.addOne(toKey(id, this.maxIdBytes), entry, options, options.now ?? this.clock()),
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  override confirm(claim: ClaimRef, options: ConfirmOptions): Promise<boolean> {
    try {
      this.assertOpen();
      return Promise.resolve(
        this.confirmOne(
          toKey(claim.id, this.maxIdBytes),
          claim.owner,
          options.ttlMs,
          this.clock(),
          options.result,
        ),
      );
    } catch (error) {
      return Promise.reject(error);
    }
  }

  override get(id: MessageId, options: ReadOptions = {}): Promise<IdempotencyRecord | undefined> {
    try {
      this.assertOpen();
      return Promise.resolve(this.getOne(toKey(id, this.maxIdBytes), options.now ?? this.clock()));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    return entries.map((entry) => this.addOne(entry.key, entry, options, now));
  }

  private addOne(key: string, entry: Omit<AddEntry, 'id'>, options: AddOptions, now: number): AddResult {
    const existing = this.#records.get(key);
    if (existing !== undefined && isLive(existing, now)) {
      this.#touch(key, existing);
      return { added: false, existing };
    }
    const record = newRecord(key, entry, options, now);
    if (existing === undefined) this.#insert(key, record);
    else this.#touch(key, record);
    return { added: true, record };
  }

  private getOne(key: string, now: number): IdempotencyRecord | undefined {
    const record = this.#records.get(key);
    return record !== undefined && isLive(record, now) ? record : undefined;
  }

  private confirmOne(key: string, owner: string, ttlMs: number, now: number, result?: string): boolean {
    const record = this.#records.get(key);
    if (record === undefined || record.state !== 'in-flight' || record.owner !== owner) return false;
    this.#records.set(key, confirmedRecord(record, ttlMs, now, result));
    return true;
  }

  /** Stores the record as the most recently used, evicting the least recently used past the bound. */
  #touch(key: string, record: IdempotencyRecord): void {
    this.#records.delete(key);
    this.#insert(key, record);
  }

  /** Stores a key known to be absent (no delete needed to move it to the recent end). */
  #insert(key: string, record: IdempotencyRecord): void {
    this.#records.set(key, record);
    if (this.#records.size > this.#maxEntries) {
      const oldest = this.#records.keys().next().value as string;
      this.#records.delete(oldest);
    }
  }

  protected async doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    return keys.map((key) => this.getOne(key, now));
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]> {
    return claims.map(({ key, owner, result }) => this.confirmOne(key, owner, ttlMs, now, result));
  }

  protected async doRemove(key: string, owner: string | undefined, _now: number): Promise<boolean> {
    const record = this.#records.get(key);
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
