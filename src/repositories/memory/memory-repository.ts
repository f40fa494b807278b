import { BaseRepository, type KeyedClaim, type KeyedEntry, SCAN_PAGE } from '../../store/base.js';
import { MAX_ID_BYTES } from '../../store/ids.js';
import { confirmedRecord, isClaimOf, isLive, newRecord, renewedRecord } from '../../store/record.js';
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
import { chunk } from '../shared.js';
import { type MemoryRepositoryOptions, parseMemoryOptions } from './options.js';

/** The record fields of an add that carries none (no object per call). */
const NO_FIELDS: Omit<AddEntry, 'id'> = Object.freeze({});

/** Each async verb (or storage call) and the direct verb that answers it at once. */
const DIRECT_VERBS = [
  ['add', 'addDirect'],
  ['get', 'getDirect'],
  ['confirm', 'confirmDirect'],
  ['remove', 'removeDirect'],
  ['markMany', 'markDirect'],
  ['doMarkMany', 'markDirect'],
] as const;

/**
 * A confirmed record with a fingerprint or a result, without an event time: its compact expiry (as a bare one's)
 * and the two strings, one small object where the record would be four (the record, its property array and two
 * boxed times) for the garbage collector to copy and mark.
 */
class Kept {
  constructor(
    readonly offset: number,
    readonly fingerprint: string | undefined,
    readonly result: string | undefined,
  ) {}
}

/** A record as the memory store holds it: the record, or a confirmed record's compact form. Opaque. */
export type HeldRecord = IdempotencyRecord | number | Kept;

/**
 * In-process store for tests and small jobs: a bounded LRU map (an evicted live id can repeat: size `maxEntries`
 * above the ids seen within one TTL), with a second chance (CLOCK): a use only marks the key, as moving it on every
 * use left dead entries in V8's hash chains (one hot key cost 40 µs a use, rising past 300 µs). A bare confirmed
 * record is kept as its expiry counted from `#base` (first seen: less the one retention gap `#gap`): a Map of
 * fresh objects makes the GC copy every record it keeps.
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
  readonly #records = new Map<string, HeldRecord>();
  /** Keys used since they last reached the oldest end: spared once by eviction. */
  readonly #used = new Set<string>();
  /**
   * Where eviction goes on from (every key before it is gone or moved): a fresh `keys()` per eviction walked the
   * deleted slots V8 keeps until its next rehash, 25 µs an add at 100k entries against 1 µs below the bound.
   */
  #oldest: MapIterator<string> | undefined;
  #base: number | undefined;
  #gap: number | undefined;
  readonly #maxEntries: number;
  /** This map as the `kafka` repository's local index (see `LocalRecords`). */
  readonly localRecords: LocalRecords<HeldRecord> = {
    peek: (key) => this.#records.get(key),
    recordOf: (key, held) => this.#record(key, held),
    put: (key, held) => {
      const stored = typeof held === 'number' || held instanceof Kept ? held : this.#compact(held);
      if (this.#records.has(key)) this.#touch(key, stored);
      else this.#insert(key, stored);
    },
    delete: (key) => this.#delete(key),
  };

  /** Opens a memory store, as every store opens (`new MemoryRepository(options)` does the same at once). */
  static async open(options: MemoryRepositoryOptions = {}): Promise<MemoryRepository> {
    return new MemoryRepository(options);
  }

  constructor(options: MemoryRepositoryOptions = {}) {
    super(options);
    const { clock: _clock, ...rest } = options;
    this.#maxEntries = parseMemoryOptions(rest).maxEntries;
    // A subclass's override of an async verb (a test double) also serves its direct verb.
    const own = MemoryRepository.prototype as unknown as Record<string, unknown>;
    const self = this as unknown as Record<string, unknown>;
    for (const [verb, direct] of DIRECT_VERBS) {
      if (self[verb] !== own[verb] && self[direct] === own[direct]) self[direct] = super[direct];
    }
  }

  /** Number of records held, live or not yet swept. */
  get size(): number {
    return this.#records.size;
  }

  // The single-key verbs answer at once; the async ones are those answers in a promise.
  override addDirect(
    id: MessageId,
    options: AddOptions,
    entry?: Omit<AddEntry, 'id'>,
  ): MaybePromise<AddResult> {
    return this.#add(id, options, entry);
  }

  override getDirect(id: MessageId, options?: ReadOptions): MaybePromise<IdempotencyRecord | undefined> {
    return this.#get(id, options);
  }

  override confirmDirect(claim: ClaimRef, options: ConfirmOptions): MaybePromise<boolean> {
    return this.#confirm(claim, options);
  }

  override removeDirect(id: MessageId, owner?: string): MaybePromise<boolean> {
    return this.removeOne(this.checkedKey(id), owner);
  }

  /** This store's mark is its add without a lease (BaseRepository's doMarkMany). */
  override markDirect(entry: AddEntry, options: MarkOptions): MaybePromise<boolean> {
    const { ttlMs, now, minLifetimeMs } = options;
    return this.#add(entry.id, { ttlMs, now, minLifetimeMs }, entry).added;
  }

  override add(id: MessageId, options: AddOptions, entry?: Omit<AddEntry, 'id'>): Promise<AddResult> {
    return settle(() => this.#add(id, options, entry));
  }

  override confirm(claim: ClaimRef, options: ConfirmOptions): Promise<boolean> {
    return settle(() => this.#confirm(claim, options));
  }

  override get(id: MessageId, options?: ReadOptions): Promise<IdempotencyRecord | undefined> {
    return settle(() => this.#get(id, options));
  }

  #add(id: MessageId, options: AddOptions, entry: Omit<AddEntry, 'id'> = NO_FIELDS): AddResult {
    return this.addOne(this.checkedKey(id, options), entry, options, options.now ?? this.clock());
  }

  #get(id: MessageId, options?: ReadOptions): IdempotencyRecord | undefined {
    return this.getOne(this.checkedKey(id), options?.now ?? this.clock());
  }

  #confirm(claim: ClaimRef, options: ConfirmOptions): boolean {
    const key = this.checkedKey(claim.id, options);
    return this.confirmOne(key, claim.owner, options.ttlMs, this.clock(), options.result);
  }

  protected async doAddMany(entries: readonly KeyedEntry[], options: AddOptions, now: number) {
    return entries.map((entry) => this.addOne(entry.key, entry, options, now));
  }

  private addOne(key: string, entry: Omit<AddEntry, 'id'>, options: AddOptions, now: number): AddResult {
    const held = this.#records.get(key);
    if (held !== undefined && this.#live(held, now)) {
      this.#used.add(key);
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
    return typeof held === 'object' && !(held instanceof Kept) && isClaimOf(held, owner) ? held : undefined;
  }

  private confirmOne(key: string, owner: string, ttlMs: number, now: number, result?: string): boolean {
    const held = this.#claimOf(key, owner);
    if (held === undefined) return false;
    // Straight to the compact form, without the object it would be compacted from.
    const offset =
      held.eventTime === undefined ? this.#offset(now + ttlMs, held.firstSeenAt, ttlMs) : undefined;
    this.#records.set(
      key,
      offset === undefined
        ? confirmedRecord(held, ttlMs, now, result)
        : compacted(offset, held.fingerprint, result),
    );
    return true;
  }

  /** A confirmed record without an event time in its compact form; any other record as it is. */
  #compact(record: IdempotencyRecord): HeldRecord {
    if (record.state !== 'confirmed' || record.eventTime !== undefined) return record;
    const offset = this.#offset(record.expiresAt, record.firstSeenAt);
    return offset === undefined ? record : compacted(offset, record.fingerprint, record.result);
  }

  /** The compact expiry, or undefined; a confirm passes its TTL as `gap`, so a late one sets the usual gap. */
  #offset(expiresAt: number, firstSeenAt: number | undefined, gap?: number): number | undefined {
    if (firstSeenAt === undefined) return undefined;
    this.#gap ??= gap ?? expiresAt - firstSeenAt;
    this.#base ??= expiresAt;
    const offset = expiresAt - this.#base;
    return this.#base + offset === expiresAt && expiresAt - this.#gap === firstSeenAt ? offset : undefined;
  }

  /** The record held for `key` (a compact expiry becomes the confirmed record it stands for). */
  #record(key: string, held: HeldRecord): IdempotencyRecord {
    if (typeof held !== 'number' && !(held instanceof Kept)) return held;
    const expiresAt = (this.#base as number) + (typeof held === 'number' ? held : held.offset);
    const firstSeenAt = expiresAt - (this.#gap as number);
    if (typeof held === 'number') return { id: key, state: 'confirmed', expiresAt, firstSeenAt };
    const { fingerprint, result } = held;
    // One literal for the usual pair (a replay reads it): fields added one by one cost a second object.
    if (fingerprint !== undefined && result !== undefined) {
      return { id: key, state: 'confirmed', expiresAt, fingerprint, result, firstSeenAt };
    }
    const record: { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] } = {
      id: key,
      state: 'confirmed',
      expiresAt,
    };
    if (fingerprint !== undefined) record.fingerprint = fingerprint;
    if (result !== undefined) record.result = result;
    record.firstSeenAt = firstSeenAt;
    return record;
  }

  #live(held: HeldRecord, now: number): boolean {
    if (typeof held === 'number') return (this.#base as number) + held > now;
    return held instanceof Kept ? (this.#base as number) + held.offset > now : isLive(held, now);
  }

  /** Stores the record of a key that is held, and marks the key used (it stays where it is in the map). */
  #touch(key: string, held: HeldRecord): void {
    if (this.#records.get(key) !== held) this.#records.set(key, held);
    this.#used.add(key);
  }

  #delete(key: string): boolean {
    this.#used.delete(key);
    return this.#records.delete(key);
  }

  /** Stores a key known to be absent, evicting the least recently used past the bound. */
  #insert(key: string, held: HeldRecord): void {
    this.#records.set(key, held);
    if (this.#records.size > this.#maxEntries) this.#evict();
  }

  /** Drops the oldest key not used since it was last spared; a used one moves to the recent end, once. */
  #evict(): void {
    for (;;) {
      this.#oldest ??= this.#records.keys();
      let next = this.#oldest.next();
      if (next.done === true) {
        this.#oldest = this.#records.keys();
        next = this.#oldest.next();
      }
      const oldest = next.value as string;
      const held = this.#records.get(oldest) as HeldRecord;
      this.#records.delete(oldest);
      if (!this.#used.delete(oldest)) return;
      this.#records.set(oldest, held);
    }
  }

  protected async doGetMany(keys: readonly string[], now: number) {
    return keys.map((key) => this.getOne(key, now));
  }

  protected async doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number, now: number) {
    return claims.map(({ key, owner, result }) => this.confirmOne(key, owner, ttlMs, now, result));
  }

  protected override async doRenew(key: string, owner: string, leaseMs: number, now: number) {
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
    if (owner !== undefined && this.#claimOf(key, owner) === undefined) return false;
    return this.#delete(key);
  }

  /** Every record held, live or not yet swept (see `IdempotentRepository.scan`), from a copy of the map. */
  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    for (const page of chunk([...this.#records], SCAN_PAGE)) {
      await onPage(page.map(([key, held]) => this.#record(key, held)));
    }
  }

  protected async doClear(): Promise<void> {
    this.#records.clear();
    this.#used.clear();
    this.#oldest = undefined;
  }

  protected doClose(): Promise<void> {
    return this.doClear();
  }
}

/** A confirmed record's compact form: its expiry alone when it carries neither a fingerprint nor a result. */
function compacted(offset: number, fingerprint?: string, result?: string): number | Kept {
  return fingerprint === undefined && result === undefined ? offset : new Kept(offset, fingerprint, result);
}

/** The answer of `call` as a promise, its throw as a rejection. */
function settle<T>(call: () => T): Promise<T> {
  try {
    return Promise.resolve(call());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** `newRecord` of an add without fields, as one literal: fields added after creation cost V8 a second object. */
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
