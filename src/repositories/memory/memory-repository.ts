import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../../store/base.js';
import { MAX_ID_BYTES, toKey } from '../../store/ids.js';
import { confirmedRecord, isLive, newRecord, renewedRecord } from '../../store/record.js';
import type {
  AddEntry,
  AddOptions,
  AddResult,
  ClaimRef,
  ConfirmOptions,
  IdempotencyRecord,
  LocalRecords,
  MarkOptions,
  MaybePromise,
  MessageId,
  ReadOptions,
  RepositoryCapabilities,
} from '../../store/types.js';
import { type MemoryRepositoryOptions, parseMemoryOptions } from './options.js';

/** Records per `scan` page. */
const SCAN_PAGE = 1000;

/** The record fields of an add that carries none (no object per call). */
const NO_FIELDS: Omit<AddEntry, 'id'> = Object.freeze({});

/**
 * A record as the memory store holds it: the record, or for a bare confirmed record only its expiry, as a small
 * integer (see `#compact`). Opaque outside the store.
 */
export type HeldRecord = IdempotencyRecord | number;

/**
 * In-process store for tests and small jobs: a bounded LRU map. Expiry is checked on every read against the
 * record's own times, so a record past its TTL is absent even before the LRU drops it.
 *
 * The LRU is a plain Map in insertion order with a second chance (CLOCK), rather than lru-cache: this store is
 * the wrapper benchmark's baseline, and the Map measured several times cheaper per message. A use only marks the
 * key (`#used`); eviction moves a marked oldest key to the end instead of dropping it. Moving a key on every use
 * (delete, then set) is what V8 handles worst: each delete leaves a dead entry in the key's hash chain until the
 * table is rebuilt, so one hot key in a 40,000-entry map cost 40 µs a use, rising past 300 µs.
 * An evicted live id can repeat; size `maxEntries` above the ids seen within one TTL.
 *
 * A confirmed record with nothing but its times (no event time, fingerprint or result: the common case) is kept
 * as its expiry, a number counted from the store's first one, not as an object: a Map of small integers is what
 * a bare `Map` has+set costs, while a Map of fresh objects makes the garbage collector copy every record it
 * keeps. Its first-seen time is the expiry less the store's one retention gap (`#gap`: the first confirm's TTL,
 * or the first such record's `expiresAt - firstSeenAt`, a lazy mark's TTL), so only a record whose gap is that
 * one is kept compact; a claim confirmed in a later millisecond than it was made stays an object. Reads give
 * such a record back as the same plain object the store was given.
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
  /** Key → record, or a bare confirmed record's `expiresAt - #base` (see the class comment). */
  readonly #records = new Map<string, HeldRecord>();
  /** Keys used since they last reached the oldest end: spared once by eviction (see the class comment). */
  readonly #used = new Set<string>();
  /** What compact expiries count from: the first one kept, so they stay small integers for weeks. */
  #base: number | undefined;
  /** `expiresAt - firstSeenAt` of every compact record: the first one's (see the class comment). */
  #gap: number | undefined;
  readonly #maxEntries: number;
  /**
   * A subclass that overrides an async single-key verb (a test's outage double, a wrapper that counts calls)
   * gets its direct verb calling that override, so the two verbs never disagree.
   */
  readonly #inherits: { add: boolean; get: boolean; confirm: boolean; remove: boolean; markMany: boolean };
  /** `capabilities.maxIdBytes`, read once: the single-key verbs check every id against it. */
  readonly #maxIdBytes = MAX_ID_BYTES;
  /** This map as a local index (see `LocalRecords`): the `kafka` repository's. */
  readonly localRecords: LocalRecords<HeldRecord> = {
    peek: (key) => this.#records.get(key),
    recordOf: (key, held) => this.#record(key, held),
    put: (key, held) => {
      const stored = typeof held === 'number' ? held : this.#compact(held);
      if (this.#records.has(key)) this.#touch(key, stored);
      else this.#insert(key, stored);
    },
    delete: (key) => {
      this.#used.delete(key);
      return this.#records.delete(key);
    },
  };

  /**
   * Opens a memory store: the factory verb every store shares (`<Store>Repository.open`). The memory store needs no
   * I/O, so `new MemoryRepository(options)` does the same synchronously.
   */
  static async open(options: MemoryRepositoryOptions = {}): Promise<MemoryRepository> {
    return new MemoryRepository(options);
  }

  constructor(options: MemoryRepositoryOptions = {}) {
    super(options);
    const { clock: _clock, ...rest } = options;
    this.#maxEntries = parseMemoryOptions(rest).maxEntries;
    const own = MemoryRepository.prototype;
    this.#inherits = {
      add: this.add === own.add,
      get: this.get === own.get,
      confirm: this.confirm === own.confirm,
      remove: this.remove === own.remove,
      markMany:
        this.markMany === own.markMany &&
        (this as unknown as { doMarkMany: unknown }).doMarkMany ===
          (own as unknown as { doMarkMany: unknown }).doMarkMany,
    };
  }

  /** Number of records held, live or not yet swept. */
  get size(): number {
    return this.#records.size;
  }

  /*
   * The single-key calls (every `wrap` call makes two) answer at once through the direct verbs (see
   * `BaseRepository.addDirect`), and the async verbs are those answers in a promise: this store cannot
   * fail, so there is no client error to wrap, only the id to check. Same checks, same answers as the base class.
   */
  override addDirect(
    id: MessageId,
    options: AddOptions,
    entry?: Omit<AddEntry, 'id'>,
  ): MaybePromise<AddResult> {
    return this.#inherits.add ? this.#add(id, options, entry) : this.add(id, options, entry);
  }

  override getDirect(id: MessageId, options?: ReadOptions): MaybePromise<IdempotencyRecord | undefined> {
    return this.#inherits.get ? this.#get(id, options) : this.get(id, options);
  }

  override confirmDirect(claim: ClaimRef, options: ConfirmOptions): MaybePromise<boolean> {
    return this.#inherits.confirm ? this.#confirm(claim, options) : this.confirm(claim, options);
  }

  override removeDirect(id: MessageId, owner?: string): MaybePromise<boolean> {
    if (!this.#inherits.remove) return this.remove(id, owner);
    this.assertOpen();
    return this.removeOne(toKey(id, this.#maxIdBytes), owner);
  }

  override markDirect(entry: AddEntry, options: MarkOptions): MaybePromise<boolean> {
    // This store's mark is its atomic add without a lease (BaseRepository's doMarkMany). minLifetimeMs is passed
    // on for the TTL rule only: this store forgets nothing before its expiry, so it has no use for it.
    if (!this.#inherits.markMany) return super.markDirect(entry, options);
    const { ttlMs, now, minLifetimeMs } = options;
    return this.#add(entry.id, { ttlMs, now, minLifetimeMs }, entry).added;
  }

  override add(id: MessageId, options: AddOptions, entry?: Omit<AddEntry, 'id'>): Promise<AddResult> {
    try {
      return Promise.resolve(this.#add(id, options, entry));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  override confirm(claim: ClaimRef, options: ConfirmOptions): Promise<boolean> {
    try {
      return Promise.resolve(this.#confirm(claim, options));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  override get(id: MessageId, options?: ReadOptions): Promise<IdempotencyRecord | undefined> {
    try {
      return Promise.resolve(this.#get(id, options));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #add(id: MessageId, options: AddOptions, entry: Omit<AddEntry, 'id'> = NO_FIELDS): AddResult {
    this.assertOpen();
    this.checkTimes(options);
    return this.addOne(toKey(id, this.#maxIdBytes), entry, options, options.now ?? this.clock());
  }

  #get(id: MessageId, options?: ReadOptions): IdempotencyRecord | undefined {
    this.assertOpen();
    return this.getOne(toKey(id, this.#maxIdBytes), options?.now ?? this.clock());
  }

  #confirm(claim: ClaimRef, options: ConfirmOptions): boolean {
    this.assertOpen();
    this.checkTimes(options);
    const key = toKey(claim.id, this.#maxIdBytes);
    return this.confirmOne(key, claim.owner, options.ttlMs, this.clock(), options.result);
  }

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    return entries.map((entry) => this.addOne(entry.key, entry, options, now));
  }

  private addOne(key: string, entry: Omit<AddEntry, 'id'>, options: AddOptions, now: number): AddResult {
    const held = this.#records.get(key);
    if (held !== undefined && this.#live(held, now)) {
      this.#markUsed(key);
      return { added: false, existing: this.#record(key, held) };
    }
    const record = entry === NO_FIELDS ? bareRecord(key, options, now) : newRecord(key, entry, options, now);
    const stored = this.#compact(record);
    if (held === undefined) this.#insert(key, stored);
    else this.#touch(key, stored);
    return { added: true, record };
  }

  private getOne(key: string, now: number): IdempotencyRecord | undefined {
    const held = this.#records.get(key);
    return held !== undefined && this.#live(held, now) ? this.#record(key, held) : undefined;
  }

  /** The owner's in-flight claim on `key`, if it holds one (what confirm and renew may rewrite). */
  #claimOf(key: string, owner: string): IdempotencyRecord | undefined {
    const held = this.#records.get(key);
    return typeof held === 'object' && held.state === 'in-flight' && held.owner === owner ? held : undefined;
  }

  private confirmOne(key: string, owner: string, ttlMs: number, now: number, result?: string): boolean {
    const held = this.#claimOf(key, owner);
    if (held === undefined) return false;
    const bare = held.eventTime === undefined && held.fingerprint === undefined && result === undefined;
    // A bare record goes straight to its compact form, without the object it would be compacted from.
    const expiresAt = now + ttlMs;
    const offset = bare ? this.#offset(expiresAt, held.firstSeenAt, ttlMs) : undefined;
    this.#records.set(key, offset ?? confirmedRecord(held, ttlMs, now, result));
    return true;
  }

  /** A bare confirmed record as its compact expiry; any other record as it is. */
  #compact(record: IdempotencyRecord): IdempotencyRecord | number {
    if (
      record.state !== 'confirmed' ||
      record.eventTime !== undefined ||
      record.fingerprint !== undefined ||
      record.result !== undefined
    ) {
      return record;
    }
    return this.#offset(record.expiresAt, record.firstSeenAt) ?? record;
  }

  /**
   * The compact form of a bare confirmed record with these times, or undefined when they cannot be one: no
   * first-seen time (a record of an older version, replayed), another retention gap than the store's, or a
   * fractional time that would not round-trip (exact for whole milliseconds). `gap`: the store's gap if it has
   * none yet. A confirm passes its TTL, the gap of a claim confirmed in the millisecond it was made (and of every
   * lazy mark), not its record's own: a first claim confirmed a millisecond later would leave every later one an
   * object.
   */
  #offset(expiresAt: number, firstSeenAt: number | undefined, gap?: number): number | undefined {
    if (firstSeenAt === undefined) return undefined;
    this.#gap ??= gap ?? expiresAt - firstSeenAt;
    this.#base ??= expiresAt;
    const offset = expiresAt - this.#base;
    return this.#base + offset === expiresAt && expiresAt - this.#gap === firstSeenAt ? offset : undefined;
  }

  /** The record held for `key` (a compact expiry becomes the confirmed record it stands for). */
  #record(key: string, held: IdempotencyRecord | number): IdempotencyRecord {
    if (typeof held !== 'number') return held;
    const expiresAt = (this.#base as number) + held;
    return { id: key, state: 'confirmed', expiresAt, firstSeenAt: expiresAt - (this.#gap as number) };
  }

  #live(held: IdempotencyRecord | number, now: number): boolean {
    return typeof held === 'number' ? (this.#base as number) + held > now : isLive(held, now);
  }

  /** Stores the record of a key that is held, and marks the key used (it stays where it is in the map). */
  #touch(key: string, held: IdempotencyRecord | number): void {
    if (this.#records.get(key) !== held) this.#records.set(key, held);
    this.#markUsed(key);
  }

  /** Marks a held key used, its record unchanged (a duplicate: the caller already has the entry). */
  #markUsed(key: string): void {
    this.#used.add(key);
  }

  /** Stores a key known to be absent, evicting the least recently used past the bound. */
  #insert(key: string, held: IdempotencyRecord | number): void {
    this.#records.set(key, held);
    if (this.#records.size > this.#maxEntries) this.#evict();
  }

  /** Drops the oldest key not used since it was last spared; a used one moves to the recent end, once. */
  #evict(): void {
    for (;;) {
      const oldest = this.#records.keys().next().value as string;
      const held = this.#records.get(oldest) as HeldRecord;
      this.#records.delete(oldest);
      if (!this.#used.delete(oldest)) return;
      this.#records.set(oldest, held);
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

  protected override async doRenew(
    key: string,
    owner: string,
    leaseMs: number,
    now: number,
  ): Promise<boolean> {
    const held = this.#claimOf(key, owner);
    if (held === undefined) return false;
    this.#records.set(key, renewedRecord(held, leaseMs, now));
    return true;
  }

  protected async doRemove(key: string, owner: string | undefined, _now: number): Promise<boolean> {
    return this.removeOne(key, owner);
  }

  private removeOne(key: string, owner: string | undefined): boolean {
    const held = this.#records.get(key);
    if (held === undefined) return false;
    if (
      owner !== undefined &&
      (typeof held === 'number' || held.state !== 'in-flight' || held.owner !== owner)
    ) {
      return false;
    }
    this.#used.delete(key);
    return this.#records.delete(key);
  }

  /** Every record held, live or not yet swept (see `IdempotentRepository.scan`), from a copy of the map. */
  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    let page: IdempotencyRecord[] = [];
    for (const [key, held] of [...this.#records]) {
      page.push(this.#record(key, held));
      if (page.length === SCAN_PAGE) {
        await onPage(page);
        page = [];
      }
    }
    if (page.length > 0) await onPage(page);
  }

  protected async doClear(): Promise<void> {
    this.#records.clear();
    this.#used.clear();
  }

  protected async doClose(): Promise<void> {
    this.#records.clear();
    this.#used.clear();
  }
}

/**
 * `newRecord` for an add that carries no fields (every `wrap` claim and lazy mark), written as one object literal:
 * a record given its lease and owner after it was made is two objects (V8 keeps added fields apart).
 */
function bareRecord(key: string, options: AddOptions, now: number): IdempotencyRecord {
  const { leaseMs } = options;
  if (leaseMs === undefined) {
    return { id: key, state: 'confirmed', expiresAt: now + options.ttlMs, firstSeenAt: now };
  }
  return {
    id: key,
    state: 'in-flight',
    expiresAt: now + options.ttlMs,
    leaseExpiresAt: now + leaseMs,
    owner: options.owner,
    firstSeenAt: now,
  };
}
