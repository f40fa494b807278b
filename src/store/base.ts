import { RenewUnsupportedError, RepositoryClosedError, toRepositoryError } from '../errors.js';
import { idOfKey, MAX_ID_BYTES, toKey } from './ids.js';
import { checkDuration, isValidDuration, maxDurationMs } from './ttl.js';
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
  MaybePromise,
  MessageId,
  ReadOptions,
  RenewOptions,
  RepositoryCapabilities,
} from './types.js';

/** An add entry whose id is already the canonical key (`result` is kept only by a lazy mark). */
export interface KeyedEntry extends Omit<AddEntry, 'id'> {
  readonly key: string;
}

/** A claim whose id is already the canonical key, with the outcome to keep when it is confirmed. */
export interface KeyedClaim extends Omit<ConfirmRef, 'id'> {
  readonly key: string;
}

type Times = Pick<AddOptions, 'ttlMs' | 'leaseMs' | 'minLifetimeMs'>;

/** Records per page of a store's `scan` (a tool's walk, never the message path). */
export const SCAN_PAGE = 1000;

/** Options every repository accepts. */
export interface BaseRepositoryOptions {
  /** Clock in epoch ms (tests inject one to step over TTLs); defaults to `Date.now`. */
  readonly clock?: () => number;
}

/**
 * The shared work of every store (Powertools' BasePersistenceLayer): id and time validation, in-batch repeats,
 * the closed state and error wrapping. A store implements the `do*` calls, given unique keys and the time.
 */
export abstract class BaseRepository implements IdempotentRepository {
  abstract readonly capabilities: RepositoryCapabilities;
  /** Short store name used in error messages. */
  protected abstract readonly storeName: string;
  protected readonly clock: () => number;
  #closed = false;
  #closing: Promise<void> | undefined;

  constructor(options: BaseRepositoryOptions = {}) {
    this.clock = options.clock ?? Date.now;
  }

  /** The clock of a repository built on this class: a wrapper judges times as its inner store does. */
  protected static clockOf(repository: IdempotentRepository): (() => number) | undefined {
    return repository instanceof BaseRepository ? repository.clock : undefined;
  }

  /** The store name of a repository built on this class, for a wrapper's messages. */
  protected static nameOf(repository: IdempotentRepository): string | undefined {
    return repository instanceof BaseRepository ? repository.storeName : undefined;
  }

  /** Inserts each (unique) key if absent or no longer live. */
  protected abstract doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]>;
  /** Live records for the keys (undefined where absent or expired). */
  protected abstract doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]>;
  /** Confirms each claim if it is still the owner's in-flight record. */
  protected abstract doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]>;
  /** Extends the owner's claim (see `renew`); by default RenewUnsupportedError (the consumer warns once). */
  protected async doRenew(_key: string, _owner: string, _leaseMs: number, _now: number): Promise<boolean> {
    throw new RenewUnsupportedError(
      `${this.storeName} cannot renew a lease: the repository does not implement doRenew`,
    );
  }
  /** Deletes the key; with an owner, only that owner's in-flight record. */
  protected abstract doRemove(key: string, owner: string | undefined, now: number): Promise<boolean>;
  protected abstract doClear(): Promise<void>;
  protected abstract doClose(): Promise<void>;

  /** Single-key add; stores with a cheaper single path override it. */
  protected async doAdd(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    const [result] = await this.doAddMany([entry], options, now);
    return result as AddResult;
  }

  /** Lazy mark of unique keys (see `IdempotentRepository.markMany`); by default an add without a lease. */
  protected async doMarkMany(
    entries: readonly KeyedEntry[],
    options: MarkOptions,
    now: number,
  ): Promise<boolean[]> {
    return (await this.doAddMany(entries, options, now)).map((r) => r.added);
  }

  /** Single-claim confirm; stores with a cheaper single path override it. */
  protected async doConfirm(claim: KeyedClaim, ttlMs: number, now: number): Promise<boolean> {
    const [ok] = await this.doConfirmMany([claim], ttlMs, now);
    return ok === true;
  }

  protected get maxIdBytes(): number {
    return this.capabilities?.maxIdBytes ?? MAX_ID_BYTES;
  }

  /** Refuses a TTL, lease or lifetime out of (0, max] before a write: a NaN expiry acts differently per store. */
  protected checkTimes(options: Times): void {
    const max = maxDurationMs(this.capabilities?.maxTtlMs);
    const { ttlMs, leaseMs, minLifetimeMs } = options;
    if (
      isValidDuration(ttlMs, max) &&
      (leaseMs === undefined || isValidDuration(leaseMs, max)) &&
      (minLifetimeMs === undefined || isValidDuration(minLifetimeMs, max))
    ) {
      return;
    }
    const where = `${this.storeName} repository`;
    checkDuration('ttlMs', ttlMs, max, where);
    if (leaseMs !== undefined) checkDuration('leaseMs', leaseMs, max, where);
    if (minLifetimeMs !== undefined) checkDuration('minLifetimeMs', minLifetimeMs, max, where);
  }

  /** A single-key verb's checks, in this order: open, valid `times` (when given), a valid id; returns its key. */
  protected checkedKey(id: MessageId, times?: Times): string {
    this.assertOpen();
    if (times !== undefined) this.checkTimes(times);
    return toKey(id, this.maxIdBytes);
  }

  async add(id: MessageId, options: AddOptions, entry: Omit<AddEntry, 'id'> = {}): Promise<AddResult> {
    const key = this.checkedKey(id, options);
    return this.run('add', () =>
      this.doAdd(keyedEntry(key, entry, options.leaseMs === undefined), options, options.now ?? this.clock()),
    );
  }

  async addMany(entries: readonly AddEntry[], options: AddOptions): Promise<AddResult[]> {
    const { unique, slot } = this.#unique(entries, options, options.leaseMs === undefined);
    if (unique.length === 0) return [];
    const results = await this.run('addMany', () =>
      this.doAddMany(unique, options, options.now ?? this.clock()),
    );
    return slot.map((s) => {
      if (s >= 0) return results[s] as AddResult;
      // A repeat inside the batch is a duplicate of whatever the first occurrence produced.
      const first = results[-1 - s] as AddResult;
      return { added: false, existing: first.added ? first.record : first.existing };
    });
  }

  async markMany(entries: readonly AddEntry[], options: MarkOptions): Promise<boolean[]> {
    const { unique, slot } = this.#unique(entries, options, true);
    if (unique.length === 0) return [];
    // Only the mark's fields reach the store: an options object that also carries a lease still writes marks.
    const { ttlMs, now, minLifetimeMs } = options;
    const marked = await this.run('mark', () =>
      this.doMarkMany(unique, { ttlMs, now, minLifetimeMs }, now ?? this.clock()),
    );
    // A repeat inside the batch shares the first occurrence's answer.
    return slot.map((s) => marked[s >= 0 ? s : -1 - s] === true);
  }

  /**
   * After the open and `times` checks: validated keys, each once (first occurrence wins), and where each entry
   * went: `slot[i]` is its index in `unique`, or `-1 - first` for a repeat of the entry at unique index `first`.
   */
  #unique(entries: readonly AddEntry[], times: AddOptions, keepResult: boolean) {
    this.assertOpen();
    this.checkTimes(times);
    const firstIndex = new Map<string, number>();
    const unique: KeyedEntry[] = [];
    const slot = new Array<number>(entries.length);
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i] as AddEntry;
      const key = toKey(entry.id, this.maxIdBytes);
      const seen = firstIndex.get(key);
      if (seen === undefined) {
        firstIndex.set(key, unique.length);
        slot[i] = unique.length;
        unique.push(keyedEntry(key, entry, keepResult));
      } else {
        slot[i] = -1 - seen;
      }
    }
    return { unique, slot };
  }

  async contains(id: MessageId, options: ReadOptions = {}): Promise<boolean> {
    return (await this.get(id, options)) !== undefined;
  }

  async containsMany(ids: readonly MessageId[], options: ReadOptions = {}): Promise<boolean[]> {
    return (await this.getMany(ids, options)).map((r) => r !== undefined);
  }

  async get(id: MessageId, options: ReadOptions = {}): Promise<IdempotencyRecord | undefined> {
    const key = this.checkedKey(id);
    const [record] = await this.run('get', () => this.doGetMany([key], options.now ?? this.clock()));
    return record;
  }

  async getMany(
    ids: readonly MessageId[],
    options: ReadOptions = {},
  ): Promise<(IdempotencyRecord | undefined)[]> {
    this.assertOpen();
    if (ids.length === 0) return [];
    const keys = ids.map((id) => toKey(id, this.maxIdBytes));
    return this.run('getMany', () => this.doGetMany(keys, options.now ?? this.clock()));
  }

  async confirm(claim: ClaimRef, options: ConfirmOptions): Promise<boolean> {
    const keyed = keyedClaim(this.checkedKey(claim.id, options), claim.owner, options.result);
    return this.run('confirm', () => this.doConfirm(keyed, options.ttlMs, this.clock()));
  }

  async confirmMany(claims: readonly ConfirmRef[], options: { ttlMs: number }): Promise<boolean[]> {
    this.assertOpen();
    this.checkTimes(options);
    if (claims.length === 0) return [];
    const keyed = claims.map((c) => keyedClaim(toKey(c.id, this.maxIdBytes), c.owner, c.result));
    return this.run('confirm', () => this.doConfirmMany(keyed, options.ttlMs, this.clock()));
  }

  async renew(claim: ClaimRef, options: RenewOptions): Promise<boolean> {
    this.assertOpen();
    const max = maxDurationMs(this.capabilities?.maxTtlMs);
    checkDuration('leaseMs', options.leaseMs, max, `${this.storeName} repository`);
    const key = toKey(claim.id, this.maxIdBytes);
    return this.run('renew', () => this.doRenew(key, claim.owner, options.leaseMs, this.clock()));
  }

  async remove(id: MessageId, owner?: string): Promise<boolean> {
    const key = this.checkedKey(id);
    return this.run('remove', () => this.doRemove(key, owner, this.clock()));
  }

  /*
   * The single-key fast path of `wrap` (see `singleKeyVerbs`): each is its async verb, but a store that can answer
   * at once (memory) returns the answer, or throws. Not part of the port: a wrapper gets them through its do* calls.
   */
  addDirect(id: MessageId, options: AddOptions, entry?: Omit<AddEntry, 'id'>): MaybePromise<AddResult> {
    return this.add(id, options, entry);
  }

  getDirect(id: MessageId, options?: ReadOptions): MaybePromise<IdempotencyRecord | undefined> {
    return this.get(id, options);
  }

  confirmDirect(claim: ClaimRef, options: ConfirmOptions): MaybePromise<boolean> {
    return this.confirm(claim, options);
  }

  removeDirect(id: MessageId, owner?: string): MaybePromise<boolean> {
    return this.remove(id, owner);
  }

  /** `markMany` of one entry (lazy mode's one-key mark). */
  markDirect(entry: AddEntry, options: MarkOptions): MaybePromise<boolean> {
    return this.markMany([entry], options).then((marked) => marked[0] === true);
  }

  async clear(): Promise<void> {
    this.assertOpen();
    return this.run('clear', () => this.doClear());
  }

  async close(): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#closed = true;
    this.#closing = this.run('close', () => this.doClose());
    return this.#closing;
  }

  /** True once `close()` has been called. */
  get closed(): boolean {
    return this.#closed;
  }

  protected assertOpen(): void {
    if (this.#closed) throw new RepositoryClosedError(this.storeName);
  }

  /** Runs a store call and turns client failures into RepositoryError, naming the store and operation. */
  protected async run<T>(operation: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      throw toRepositoryError(`${this.storeName} ${operation}`, error);
    }
  }
}

/** A claim with its canonical key; `result` only when there is one. */
function keyedClaim(key: string, owner: string, result: string | undefined): KeyedClaim {
  return result === undefined ? { key, owner } : { key, owner, result };
}

/** The keyed form of an add entry (or a record's fields); a result travels only with a lazy mark. */
export function keyedEntry(key: string, entry: Omit<AddEntry, 'id'>, keepResult: boolean): KeyedEntry {
  const keyed: { -readonly [K in keyof KeyedEntry]: KeyedEntry[K] } = { key };
  if (entry.eventTime !== undefined) keyed.eventTime = entry.eventTime;
  if (entry.fingerprint !== undefined) keyed.fingerprint = entry.fingerprint;
  if (entry.result !== undefined && keepResult) keyed.result = entry.result;
  return keyed;
}

/** The add entry of a keyed one, for a wrapper that hands its keys on to a store taking ids. */
export function entryOf({ key, ...fields }: KeyedEntry): AddEntry {
  return { id: idOfKey(key), ...fields };
}
