import { RenewUnsupportedError, RepositoryClosedError, RepositoryError } from '../../errors.js';
import { idOfKey, MAX_ID_BYTES, toKey } from '../../store/ids.js';
import { confirmedRecord, isLive, newRecord } from '../../store/record.js';
import { checkDuration, maxDurationMs } from '../../store/ttl.js';
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
} from '../../store/types.js';
import type { ChangelogChange, ChangelogSink } from './changelog.js';

/**
 * Direct access to the records of a store held in this process (the memory store has it). With it a logged
 * store undoes a refused write exactly and restores records as they were written; without it, it goes through
 * the store's verbs (see {@link LoggedRepository.restore}).
 */
export interface LocalRecordAccess {
  peekRecord(key: string): unknown;
  recordOf(key: string, held: never): IdempotencyRecord;
  putRecord(key: string, record: IdempotencyRecord): void;
  deleteRecord(key: string): boolean;
}

function localAccess(store: IdempotentRepository): LocalRecordAccess | undefined {
  const s = store as Partial<LocalRecordAccess>;
  return typeof s.peekRecord === 'function' &&
    typeof s.recordOf === 'function' &&
    typeof s.putRecord === 'function' &&
    typeof s.deleteRecord === 'function'
    ? (s as LocalRecordAccess)
    : undefined;
}

/** Options of a {@link LoggedRepository}. */
export interface LoggedRepositoryOptions {
  /** Clock in epoch ms (the times of staged records and restores); defaults to `Date.now`. */
  readonly clock?: () => number;
  /**
   * Whether `close()` also closes the inner store (default true). False where several logged views share one
   * store: the node gives each input partition its own view (and changelog partition) over one local store.
   */
  readonly closeInner?: boolean;
  /** Store name in error messages; default `logged <inner name>`. */
  readonly name?: string;
  /** What the logged store declares; default the inner store's (a subclass may promise more, e.g. persistence). */
  readonly capabilities?: RepositoryCapabilities;
}

/** Restored confirmed records are kept to the end of the minute they expire in: one store call per minute. */
const RESTORE_BUCKET_MS = 60_000;

/** A change this store made, and how to take it back locally if the changelog refuses it. */
interface Made {
  readonly change: ChangelogChange;
  readonly undo?: () => Promise<unknown>;
}

/**
 * A repository whose every write reaches a changelog: Kafka Streams' `ChangeLoggingKeyValueBytesStore` for our
 * interface. Every write verb, the single-key fast paths included, goes through one private write path, so no
 * write can reach the inner store without reaching the log. A store rebuilt from the log (a new instance that
 * {@link restore}s it into an empty inner store) holds what this one holds.
 *
 * Outside a transaction a write is decided and applied by the inner store (its atomicity is the store's), then
 * appended; the call resolves after the append. If the changelog refuses it, the local write is undone (a new
 * record is removed; with {@link LocalRecordAccess}, whatever the key held is put back) and the call rejects
 * with a RepositoryError.
 *
 * Inside a transaction ({@link begin}) the inner store is not written: each write is decided against the inner
 * store's records with the transaction's own changes on top, and staged. Reads see the staged changes. The
 * caller sends {@link staged} with its own transaction and then {@link commit}s (the changes are applied to the
 * inner store) or {@link rollback}s (they are dropped). A crash in between leaves the inner store without them:
 * the store never holds a change whose transaction did not commit, and the changelog is what a restore repairs
 * it from. This is how the exactly-once node keeps its local store a cache of its changelog.
 */
export class LoggedRepository implements IdempotentRepository {
  readonly capabilities: RepositoryCapabilities;
  readonly #inner: IdempotentRepository;
  /** The inner store's `scan`, when it has one (see `IdempotentRepository.scan`). */
  readonly scan?: IdempotentRepository['scan'];
  readonly #sink: ChangelogSink;
  readonly #clock: () => number;
  readonly #local: LocalRecordAccess | undefined;
  readonly #closeInner: boolean;
  readonly #name: string;
  readonly #maxIdBytes: number;
  #closed = false;
  #closing: Promise<void> | undefined;
  /** In a transaction: the staged record of each key it changed (null: deleted), and the changes in order. */
  #tx:
    | { readonly records: Map<string, IdempotencyRecord | null>; readonly changes: ChangelogChange[] }
    | undefined;

  constructor(inner: IdempotentRepository, sink: ChangelogSink, options: LoggedRepositoryOptions = {}) {
    this.#inner = inner;
    // A read of the inner store's records: nothing to log or cache. Present only where the inner store has it.
    if (inner.scan !== undefined) {
      const scan = inner.scan.bind(inner);
      this.scan = async (onPage) => {
        this.#assertOpen();
        return scan(onPage);
      };
    }
    this.#sink = sink;
    this.#clock = options.clock ?? Date.now;
    this.#local = localAccess(inner);
    this.#closeInner = options.closeInner ?? true;
    this.#name = options.name ?? `logged ${(inner as { storeName?: string }).storeName ?? 'store'}`;
    this.capabilities = options.capabilities ?? inner.capabilities;
    this.#maxIdBytes = inner.capabilities?.maxIdBytes ?? MAX_ID_BYTES;
  }

  /** The store the changes are applied to. */
  get inner(): IdempotentRepository {
    return this.#inner;
  }

  /** True once `close()` has been called. */
  get closed(): boolean {
    return this.#closed;
  }

  // ---- transactions ------------------------------------------------------------------------------------------

  /** Starts staging writes (see the class comment). One transaction at a time. */
  begin(): void {
    this.#assertOpen();
    if (this.#tx) throw new TypeError(`${this.#name}: a transaction is already open`);
    this.#tx = { records: new Map(), changes: [] };
  }

  /** True between {@link begin} and {@link commit} or {@link rollback}. */
  get inTransaction(): boolean {
    return this.#tx !== undefined;
  }

  /** The open transaction's changes, in the order they were decided (what goes to the changelog). */
  staged(): readonly ChangelogChange[] {
    return this.#tx?.changes ?? [];
  }

  /**
   * The caller's transaction committed (the staged changes are in the changelog): applies them to the inner
   * store and ends the transaction. A failure here leaves the inner store behind its changelog; a restore
   * repairs it.
   */
  async commit(): Promise<void> {
    const tx = this.#tx;
    this.#tx = undefined;
    if (tx === undefined || tx.changes.length === 0) return;
    // Exact expiries: a chunk's marks share one, so this is one store call in the usual case.
    await this.#apply(tx.changes, this.#clock(), 1);
  }

  /** Drops the open transaction's changes (its caller's transaction aborted); the inner store never saw them. */
  rollback(): void {
    this.#tx = undefined;
  }

  // ---- restore -----------------------------------------------------------------------------------------------

  /**
   * Applies changes read back from the changelog to the inner store, without logging them again (the restore
   * of a new owner, or another writer's changes followed from a shared log). The last change of each key wins;
   * a record no longer live is not written (its key is deleted). Resolves with how many live records it wrote.
   */
  async restore(changes: readonly ChangelogChange[]): Promise<number> {
    this.#assertOpen();
    return this.#apply(changes, this.#clock(), RESTORE_BUCKET_MS);
  }

  // ---- reads -------------------------------------------------------------------------------------------------

  async get(id: MessageId, options?: ReadOptions): Promise<IdempotencyRecord | undefined> {
    this.#assertOpen();
    if (!this.#tx) return this.#inner.get(id, options);
    const [record] = await this.#current([toKey(id, this.#maxIdBytes)], options?.now ?? this.#clock());
    return record;
  }

  async getMany(
    ids: readonly MessageId[],
    options?: ReadOptions,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    this.#assertOpen();
    if (!this.#tx) return this.#inner.getMany(ids, options);
    return this.#current(
      ids.map((id) => toKey(id, this.#maxIdBytes)),
      options?.now ?? this.#clock(),
    );
  }

  async contains(id: MessageId, options?: ReadOptions): Promise<boolean> {
    return (await this.get(id, options)) !== undefined;
  }

  async containsMany(ids: readonly MessageId[], options?: ReadOptions): Promise<boolean[]> {
    return (await this.getMany(ids, options)).map((r) => r !== undefined);
  }

  // ---- writes: each verb says what it changed, and #write logs it -------------------------------------------

  async add(id: MessageId, options: AddOptions, entry: Omit<AddEntry, 'id'> = {}): Promise<AddResult> {
    const [result] = await this.addMany([{ ...entry, id }], options);
    return result as AddResult;
  }

  async addMany(entries: readonly AddEntry[], options: AddOptions): Promise<AddResult[]> {
    this.#assertOpen();
    this.#checkTimes(options);
    if (entries.length === 0) return [];
    const keys = entries.map((e) => toKey(e.id, this.#maxIdBytes));
    if (this.#tx) return this.#stageAdds(entries, keys, options);
    return this.#write(
      keys,
      () => this.#inner.addMany(entries, options),
      (results) =>
        results.flatMap((r, i): Made[] => {
          if (!r.added) return [];
          const id = (entries[i] as AddEntry).id;
          const key = keys[i] as string;
          const undo =
            options.leaseMs === undefined
              ? () => this.#inner.remove(id)
              : () => this.#inner.remove(id, options.owner);
          return [{ change: { key, record: { ...r.record, id: key } }, undo }];
        }),
    );
  }

  async markMany(entries: readonly AddEntry[], options: MarkOptions): Promise<boolean[]> {
    this.#assertOpen();
    this.#checkTimes(options);
    if (entries.length === 0) return [];
    const keys = entries.map((e) => toKey(e.id, this.#maxIdBytes));
    const now = options.now ?? this.#clock();
    if (this.#tx) {
      const added = await this.#stageAdds(entries, keys, { ...options, now });
      // A repeat inside the call shares its first occurrence's answer, as every store answers it. (A map, not
      // `keys.indexOf` per key: that was quadratic in the chunk, most of an exactly-once chunk's store time.)
      const first = new Map<string, boolean>();
      return keys.map((key, i) => {
        const earlier = first.get(key);
        if (earlier !== undefined) return earlier;
        const answer = (added[i] as AddResult).added;
        first.set(key, answer);
        return answer;
      });
    }
    const inner = this.#inner;
    return this.#write(
      keys,
      () =>
        inner.markMany
          ? inner.markMany(entries, options)
          : inner.addMany(entries, { ...options }).then((rs) => rs.map((r) => r.added)),
      (marked) => {
        const made: Made[] = [];
        const seen = new Set<string>();
        for (let i = 0; i < marked.length; i++) {
          const key = keys[i] as string;
          if (!marked[i] || seen.has(key)) continue;
          seen.add(key);
          const entry = entries[i] as AddEntry;
          const record = newRecord(key, entry, { ttlMs: options.ttlMs }, now);
          made.push({ change: { key, record }, undo: () => inner.remove(entry.id) });
        }
        return made;
      },
    );
  }

  async confirm(claim: ClaimRef, options: ConfirmOptions): Promise<boolean> {
    const ref: ConfirmRef = options.result === undefined ? claim : { ...claim, result: options.result };
    const [ok] = await this.confirmMany([ref], { ttlMs: options.ttlMs });
    return ok === true;
  }

  async confirmMany(claims: readonly ConfirmRef[], options: { ttlMs: number }): Promise<boolean[]> {
    this.#assertOpen();
    this.#checkTimes(options);
    if (claims.length === 0) return [];
    const keys = claims.map((c) => toKey(c.id, this.#maxIdBytes));
    const now = this.#clock();
    if (this.#tx) {
      const current = await this.#current(keys, now);
      return claims.map((claim, i) => {
        const record = current[i];
        if (record?.state !== 'in-flight' || record.owner !== claim.owner) return false;
        this.#stage(keys[i] as string, confirmedRecord(record, options.ttlMs, now, claim.result));
        current[i] = undefined; // a second confirm of the same claim in one call finds it confirmed
        return true;
      });
    }
    return this.#write(
      keys,
      () => this.#inner.confirmMany(claims, options),
      async (confirmed) => {
        const at = confirmed.flatMap((ok, i) => (ok ? [i] : []));
        if (at.length === 0) return [];
        // The confirmed record as the store holds it (with the claim's fingerprint and event time).
        const held = await this.#inner.getMany(at.map((i) => (claims[i] as ConfirmRef).id));
        return at.map((i, k): Made => {
          const key = keys[i] as string;
          const claim = claims[i] as ConfirmRef;
          const record = held[k] ?? {
            id: key,
            state: 'confirmed' as const,
            expiresAt: now + options.ttlMs,
            ...(claim.result === undefined ? {} : { result: claim.result }),
          };
          return { change: { key, record: { ...record, id: key } } };
        });
      },
    );
  }

  /** Extends the owner's in-flight claim; the renewed record reaches the changelog like any other write. */
  async renew(claim: ClaimRef, options: RenewOptions): Promise<boolean> {
    this.#assertOpen();
    checkDuration(
      'leaseMs',
      options.leaseMs,
      maxDurationMs(this.capabilities.maxTtlMs),
      `${this.#name} repository`,
    );
    const inner = this.#inner;
    if (inner.renew === undefined) {
      throw new RenewUnsupportedError(`${this.#name} cannot renew a lease: its inner store has no renew()`);
    }
    const key = toKey(claim.id, this.#maxIdBytes);
    const now = this.#clock();
    if (this.#tx) {
      const [record] = await this.#current([key], now);
      if (record?.state !== 'in-flight' || record.owner !== claim.owner) return false;
      this.#stage(key, { ...record, leaseExpiresAt: now + options.leaseMs });
      return true;
    }
    return this.#write(
      [key],
      () => (inner.renew as NonNullable<IdempotentRepository['renew']>).call(inner, claim, options),
      async (renewed): Promise<Made[]> => {
        if (!renewed) return [];
        // The renewed claim as the store holds it.
        const [record] = await inner.getMany([claim.id], { now });
        return record === undefined ? [] : [{ change: { key, record: { ...record, id: key } } }];
      },
    );
  }

  async remove(id: MessageId, owner?: string): Promise<boolean> {
    this.#assertOpen();
    const key = toKey(id, this.#maxIdBytes);
    if (this.#tx) {
      const tx = this.#tx;
      const staged = tx.records.get(key);
      // Read as of time 0, so a record past its time still counts: `remove` deletes whatever the key holds.
      const record =
        staged === null ? undefined : (staged ?? (await this.#inner.getMany([id], { now: 0 }))[0]);
      if (record === undefined) return false;
      if (owner !== undefined && (record.state !== 'in-flight' || record.owner !== owner)) return false;
      this.#stage(key, undefined);
      return true;
    }
    return this.#write(
      [key],
      () => this.#inner.remove(id, owner),
      (removed): Made[] => (removed ? [{ change: { key, record: undefined } }] : []),
    );
  }

  /** Deletes every record of the inner store and the changelog. Not inside a transaction. */
  async clear(): Promise<void> {
    this.#assertOpen();
    if (this.#tx) throw new TypeError(`${this.#name}: clear() inside a transaction`);
    try {
      await this.#sink.clear();
    } catch (error) {
      throw new RepositoryError(
        `${this.#name} changelog clear failed: ${(error as Error)?.message ?? error}`,
        {
          cause: error,
        },
      );
    }
    await this.#inner.clear();
  }

  /*
   * The single-key fast paths are the verbs above: a logged write waits for its changelog anyway, and a fast path
   * that went to the inner store directly is exactly the write a changelog would miss.
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

  markDirect(entry: AddEntry, options: MarkOptions): MaybePromise<boolean> {
    return this.markMany([entry], options).then((marked) => marked[0] === true);
  }

  async close(): Promise<void> {
    this.#closing ??= (async () => {
      this.#closed = true;
      this.#tx = undefined;
      try {
        await this.#sink.close?.();
      } finally {
        if (this.#closeInner) await this.#inner.close();
      }
    })();
    return this.#closing;
  }

  // ---- the one write path ------------------------------------------------------------------------------------

  /**
   * The TTL rule against this store's own maximum: a logged store may keep marks for less time than its inner
   * store (the `kafka` repository's topic retention), and the inner store would accept what the changelog drops.
   */
  #checkTimes(options: { ttlMs: number; leaseMs?: number; minLifetimeMs?: number }): void {
    const max = maxDurationMs(this.capabilities.maxTtlMs);
    const where = `${this.#name} repository`;
    checkDuration('ttlMs', options.ttlMs, max, where);
    if (options.leaseMs !== undefined) checkDuration('leaseMs', options.leaseMs, max, where);
    if (options.minLifetimeMs !== undefined)
      checkDuration('minLifetimeMs', options.minLifetimeMs, max, where);
  }

  /**
   * Runs a write on the inner store and appends what it changed. With local record access the change is read
   * off the store (before and after, so every field is as written); otherwise the verb says it (`made`).
   */
  async #write<T>(
    keys: readonly string[],
    call: () => Promise<T>,
    made: (result: T) => Made[] | Promise<Made[]>,
  ): Promise<T> {
    const local = this.#local;
    let changes: ChangelogChange[];
    let undo: () => Promise<void>;
    let result: T;
    if (local) {
      const unique = [...new Set(keys)];
      const before = unique.map((key) => local.peekRecord(key));
      result = await call();
      changes = [];
      const changed: { key: string; before: unknown; after: unknown }[] = [];
      for (let i = 0; i < unique.length; i++) {
        const key = unique[i] as string;
        const held = local.peekRecord(key);
        if (held === before[i]) continue;
        changed.push({ key, before: before[i], after: held });
        changes.push({ key, record: held === undefined ? undefined : local.recordOf(key, held as never) });
      }
      undo = async () => {
        for (const { key, before: old, after } of changed) {
          // Only where nothing changed the key since this write.
          if (local.peekRecord(key) !== after) continue;
          if (old === undefined) local.deleteRecord(key);
          else local.putRecord(key, local.recordOf(key, old as never));
        }
      };
    } else {
      result = await call();
      const list = await made(result);
      changes = list.map((m) => m.change);
      undo = async () => {
        await Promise.allSettled(list.map((m) => m.undo?.()));
      };
    }
    if (changes.length === 0) return result;
    try {
      await this.#sink.append(changes);
    } catch (error) {
      await undo();
      throw new RepositoryError(
        `${this.#name} changelog append failed: ${(error as Error)?.message ?? error}`,
        {
          cause: error,
        },
      );
    }
    return result;
  }

  // ---- transactions: decided against the inner store with the staged changes on top -------------------------

  /** The live record of each key: the staged one if the transaction changed it, else the inner store's. */
  async #current(keys: readonly string[], now: number): Promise<(IdempotencyRecord | undefined)[]> {
    const staged = this.#tx?.records;
    const out = new Array<IdempotencyRecord | undefined>(keys.length);
    const ask: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      const record = staged?.get(keys[i] as string);
      if (record === undefined) ask.push(i);
      else out[i] = record !== null && isLive(record, now) ? record : undefined;
    }
    if (ask.length > 0) {
      const read = await this.#inner.getMany(
        ask.map((i) => idOfKey(keys[i] as string)),
        { now },
      );
      for (let k = 0; k < ask.length; k++) out[ask[k] as number] = read[k];
    }
    return out;
  }

  async #stageAdds(
    entries: readonly AddEntry[],
    keys: readonly string[],
    options: AddOptions,
  ): Promise<AddResult[]> {
    const now = options.now ?? this.#clock();
    const current = await this.#current(keys, now);
    const results: AddResult[] = [];
    const first = new Map<string, AddResult>();
    for (let i = 0; i < entries.length; i++) {
      const key = keys[i] as string;
      const earlier = first.get(key);
      if (earlier) {
        results.push({ added: false, existing: earlier.added ? earlier.record : earlier.existing });
        continue;
      }
      const existing = current[i];
      let result: AddResult;
      if (existing !== undefined) {
        result = { added: false, existing };
      } else {
        const record = newRecord(key, entries[i] as AddEntry, options, now);
        this.#stage(key, record);
        result = { added: true, record };
      }
      first.set(key, result);
      results.push(result);
    }
    return results;
  }

  #stage(key: string, record: IdempotencyRecord | undefined): void {
    const tx = this.#tx;
    if (tx === undefined) throw new TypeError(`${this.#name}: no transaction is open`);
    tx.records.set(key, record ?? null);
    tx.changes.push({ key, record });
  }

  // ---- applying changes to the inner store (commit, restore) -------------------------------------------------

  /**
   * Writes changes to the inner store as they are, without logging; the last change per key wins. Through the
   * store's verbs, confirmed records are written per `bucketMs` of expiry (kept to the bucket's end).
   */
  async #apply(changes: readonly ChangelogChange[], now: number, bucketMs: number): Promise<number> {
    const last = new Map<string, IdempotencyRecord | undefined>();
    for (const { key, record } of changes) last.set(key, record);
    const local = this.#local;
    let live = 0;
    if (local) {
      for (const [key, record] of last) {
        if (record === undefined || !isLive(record, now)) local.deleteRecord(key);
        else {
          local.putRecord(key, { ...record, id: key });
          live++;
        }
      }
      return live;
    }
    // Through the store's verbs: deletions, confirmed records by minute of expiry and first-seen time, claims one
    // by one. A record is written with its first-seen time as the verb's `now` (the time the store keeps as
    // first seen), so it is kept; a batch's marks share it, so the groups stay large.
    const inner = this.#inner;
    const removals: MessageId[] = [];
    const marks = new Map<string, { at: number; bucket: number; entries: AddEntry[] }>();
    const claims: IdempotencyRecord[] = [];
    const dated: MessageId[] = [];
    for (const [key, record] of last) {
      if (record === undefined || !isLive(record, now)) {
        removals.push(idOfKey(key));
        continue;
      }
      live++;
      if (record.firstSeenAt !== undefined) dated.push(idOfKey(key));
      if (record.state === 'in-flight') {
        claims.push({ ...record, id: key });
        continue;
      }
      const bucket = Math.ceil(record.expiresAt / bucketMs) * bucketMs;
      const entry: { -readonly [K in keyof AddEntry]: AddEntry[K] } = { id: idOfKey(key) };
      if (record.eventTime !== undefined) entry.eventTime = record.eventTime;
      if (record.fingerprint !== undefined) entry.fingerprint = record.fingerprint;
      if (record.result !== undefined) entry.result = record.result;
      const at = record.firstSeenAt ?? now;
      const group = marks.get(`${bucket}:${at}`);
      if (group) group.entries.push(entry);
      else marks.set(`${bucket}:${at}`, { at, bucket, entries: [entry] });
    }
    // Judged at its earlier first-seen time, an older state of a record that the store still holds (a claim the
    // changelog has confirmed since) would count as live and keep the write out: the changelog has the last word,
    // so whatever the store holds for those keys, live or not (a read at time 0), is removed first.
    const held = dated.length === 0 ? [] : await inner.getMany(dated, { now: 0 });
    for (let i = 0; i < held.length; i++) if (held[i] !== undefined) removals.push(dated[i] as MessageId);
    for (const id of removals) await inner.remove(id);
    for (const { at, bucket, entries } of marks.values()) {
      const ttlMs = Math.max(1, bucket - at);
      if (inner.markMany) await inner.markMany(entries, { ttlMs, now: at });
      else await inner.addMany(entries, { ttlMs, now: at });
    }
    for (const claim of claims) {
      const at = claim.firstSeenAt ?? now;
      await inner.add(
        idOfKey(claim.id),
        {
          ttlMs: Math.max(1, claim.expiresAt - at),
          leaseMs: Math.max(1, (claim.leaseExpiresAt ?? now) - at),
          owner: claim.owner ?? '',
          now: at,
        },
        {
          ...(claim.eventTime === undefined ? {} : { eventTime: claim.eventTime }),
          ...(claim.fingerprint === undefined ? {} : { fingerprint: claim.fingerprint }),
        },
      );
    }
    return live;
  }

  #assertOpen(): void {
    if (this.#closed) throw new RepositoryClosedError(this.#name);
  }
}
