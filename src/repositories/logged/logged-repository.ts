import { errorMessage, RenewUnsupportedError, RepositoryError } from '../../errors.js';
import { BaseRepository, entryOf, type KeyedClaim, type KeyedEntry, keyedEntry } from '../../store/base.js';
import type { ChangelogChange, ChangelogSink } from '../../store/changelog.js';
import { idOfKey } from '../../store/ids.js';
import { markIds } from '../../store/mark.js';
import { confirmedRecord, isClaimOf, isLive, newRecord, renewedRecord } from '../../store/record.js';
import type {
  AddEntry,
  AddOptions,
  AddResult,
  ConfirmRef,
  IdempotencyRecord,
  IdempotentRepository,
  LocalRecords,
  MarkOptions,
  MessageId,
  RepositoryCapabilities,
} from '../../store/types.js';

/** Options of a {@link LoggedRepository}. */
export interface LoggedRepositoryOptions {
  /** Clock in epoch ms (the times of staged records and restores); defaults to the inner store's. */
  readonly clock?: () => number;
  /** Whether `close()` also closes the inner store (default true; false for views sharing one store). */
  readonly closeInner?: boolean;
  /** Store name in error messages; default `logged <inner name>`. */
  readonly name?: string;
  /** What the logged store declares; default the inner store's (a subclass may promise more, e.g. persistence). */
  readonly capabilities?: RepositoryCapabilities;
}

/** Restored confirmed records are kept to the end of the minute they expire in: one store call per minute. */
const RESTORE_BUCKET_MS = 60_000;

/** An open transaction: the staged record of each key it changed (null: deleted), and the changes in order. */
interface Staging {
  readonly records: Map<string, IdempotencyRecord | null>;
  readonly changes: ChangelogChange[];
}

/** A change this store made, and how to take it back locally if the changelog refuses it. */
interface Made {
  readonly change: ChangelogChange;
  readonly undo?: () => Promise<unknown>;
}

/**
 * A repository whose every write, fast paths included, reaches a changelog (Kafka Streams'
 * `ChangeLoggingKeyValueBytesStore`). Outside a transaction the inner store applies a write, then it is appended;
 * if the changelog refuses it, the write is undone and the call rejects. Inside one ({@link begin}) writes are
 * staged over the inner store: the caller sends {@link staged} in its own transaction, then commits or rolls back.
 */
export class LoggedRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities;
  protected readonly storeName: string;
  /** The store the changes are applied to. */
  readonly inner: IdempotentRepository;
  /** The inner store's `scan`, when it has one. */
  readonly scan?: IdempotentRepository['scan'];
  readonly #sink: ChangelogSink;
  readonly #local: LocalRecords | undefined;
  readonly #closeInner: boolean;
  #tx: Staging | undefined;

  constructor(inner: IdempotentRepository, sink: ChangelogSink, options: LoggedRepositoryOptions = {}) {
    super({ clock: options.clock ?? BaseRepository.clockOf(inner) });
    this.inner = inner;
    if (inner.scan !== undefined) {
      const scan = inner.scan.bind(inner);
      this.scan = async (onPage) => {
        this.assertOpen();
        return scan(onPage);
      };
    }
    this.#sink = sink;
    this.#local = (inner as { localRecords?: LocalRecords }).localRecords;
    this.#closeInner = options.closeInner ?? true;
    this.storeName = options.name ?? `logged ${BaseRepository.nameOf(inner) ?? 'store'}`;
    this.capabilities = options.capabilities ?? inner.capabilities;
  }

  /** Starts staging writes (see the class comment). One transaction at a time. */
  begin(): void {
    this.assertOpen();
    if (this.#tx) throw new TypeError(`${this.storeName}: a transaction is already open`);
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
   * The caller's transaction committed: applies its changes to the inner store (a restore repairs a failure).
   * Rejects on a closed store: the close dropped the staged changes, and the caller must not take them as applied.
   */
  async commit(): Promise<void> {
    this.assertOpen();
    const tx = this.#tx;
    this.#tx = undefined;
    if (tx === undefined || tx.changes.length === 0) return;
    // Exact expiries: a chunk's marks share one, so this is one store call in the usual case.
    await this.#apply(tx.changes, this.clock(), 1);
  }

  /** Drops the open transaction's changes (its caller's transaction aborted); the inner store never saw them. */
  rollback(): void {
    this.#tx = undefined;
  }

  /**
   * Applies changes read back from the changelog to the inner store, without logging them: the last change of
   * each key wins, a record no longer live is deleted. Resolves with how many live records it wrote.
   */
  async restore(changes: readonly ChangelogChange[]): Promise<number> {
    this.assertOpen();
    return this.#apply(changes, this.clock(), RESTORE_BUCKET_MS);
  }

  protected async doGetMany(keys: readonly string[], now: number) {
    if (this.#tx) {
      const current = await this.#current(keys, now);
      return keys.map((_, i) => current(i));
    }
    return this.inner.getMany(keys.map(idOfKey), { now });
  }

  protected async doAddMany(entries: readonly KeyedEntry[], options: AddOptions, now: number) {
    const keys = entries.map((e) => e.key);
    if (this.#tx) return this.#stageAdds(entries, keys, { ...options, now });
    return this.#write(
      keys,
      () => this.inner.addMany(entries.map(entryOf), options),
      (results) => {
        const owner = options.leaseMs === undefined ? undefined : options.owner;
        return results.flatMap((r, i): Made[] => {
          const key = keys[i] as string;
          const undo = () => this.inner.remove(idOfKey(key), owner);
          return r.added ? [{ change: { key, record: { ...r.record, id: key } }, undo }] : [];
        });
      },
    );
  }

  protected override async doMarkMany(entries: readonly KeyedEntry[], options: MarkOptions, now: number) {
    const keys = entries.map((e) => e.key);
    if (this.#tx) return (await this.#stageAdds(entries, keys, { ...options, now })).map((r) => r.added);
    return this.#write(
      keys,
      () => markIds(this.inner, entries.map(entryOf), options),
      (marked) =>
        entries.flatMap((entry, i): Made[] => {
          if (!marked[i]) return [];
          const record = newRecord(entry.key, entry, { ttlMs: options.ttlMs }, now);
          return [{ change: { key: entry.key, record }, undo: () => this.inner.remove(idOfKey(entry.key)) }];
        }),
    );
  }

  protected async doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number, now: number) {
    const keys = claims.map((c) => c.key);
    if (this.#tx) {
      const current = await this.#current(keys, now);
      return claims.map((claim, i) => {
        // A second confirm of the same claim, in this call or one in flight, finds it confirmed.
        const record = current(i);
        if (!isClaimOf(record, claim.owner)) return false;
        this.#stage(claim.key, confirmedRecord(record, ttlMs, now, claim.result));
        return true;
      });
    }
    const refs = claims.map(({ key, ...rest }): ConfirmRef => ({ id: idOfKey(key), ...rest }));
    return this.#write(
      keys,
      () => this.inner.confirmMany(refs, { ttlMs }),
      async (confirmed) => {
        const at = confirmed.flatMap((ok, i) => (ok ? [i] : []));
        if (at.length === 0) return [];
        // The confirmed record as the store holds it (with the claim's fingerprint and event time).
        const held = await this.inner.getMany(at.map((i) => (refs[i] as ConfirmRef).id));
        const readAt = this.clock();
        return at.flatMap((i, k): Made[] => {
          const { key, result } = claims[i] as KeyedClaim;
          const record =
            held[k] ?? confirmedRecord({ id: key, state: 'in-flight', expiresAt: 0 }, ttlMs, now, result);
          // Gone by the re-read: expired (the confirmed record, past its time, says so), or removed by a write
          // that logs its own change. A record still live here is one the store no longer holds: not logged.
          if (held[k] === undefined && isLive(record, readAt)) return [];
          return [{ change: { key, record: { ...record, id: key } } }];
        });
      },
    );
  }

  /** Extends the owner's in-flight claim; the renewed record reaches the changelog like any other write. */
  protected override async doRenew(key: string, owner: string, leaseMs: number, now: number) {
    const inner = this.inner;
    if (inner.renew === undefined) {
      throw new RenewUnsupportedError(
        `${this.storeName} cannot renew a lease: its inner store has no renew()`,
      );
    }
    if (this.#tx) {
      const record = (await this.#current([key], now))(0);
      if (!isClaimOf(record, owner)) return false;
      this.#stage(key, renewedRecord(record, leaseMs, now));
      return true;
    }
    const id = idOfKey(key);
    return this.#write(
      [key],
      () => inner.renew!({ id, owner }, { leaseMs }),
      async (renewed): Promise<Made[]> => {
        if (!renewed) return [];
        // The renewed claim as the store holds it.
        const [record] = await inner.getMany([id], { now });
        return record === undefined ? [] : [{ change: { key, record: { ...record, id: key } } }];
      },
    );
  }

  protected async doRemove(key: string, owner: string | undefined): Promise<boolean> {
    if (this.#tx) {
      // As of time 0, so a record past its time still counts: `remove` deletes whatever the key holds.
      const record = (await this.#current([key], 0))(0);
      if (record === undefined || (owner !== undefined && !isClaimOf(record, owner))) return false;
      this.#stage(key, undefined);
      return true;
    }
    return this.#write(
      [key],
      () => this.inner.remove(idOfKey(key), owner),
      (removed): Made[] => (removed ? [{ change: { key, record: undefined } }] : []),
    );
  }

  /** Deletes every record of the inner store and the changelog. Not inside a transaction. */
  override async clear(): Promise<void> {
    if (this.#tx) throw new TypeError(`${this.storeName}: clear() inside a transaction`);
    return super.clear();
  }

  protected async doClear(): Promise<void> {
    try {
      await this.#sink.clear();
    } catch (error) {
      throw this.#changelogError('clear', error);
    }
    await this.inner.clear();
  }

  protected async doClose(): Promise<void> {
    this.#tx = undefined;
    try {
      await this.#sink.close?.();
    } finally {
      if (this.#closeInner) await this.inner.close();
    }
  }

  /**
   * Runs a write on the inner store and appends what it changed: read off its `localRecords` (before and after)
   * where it has them, else what the verb says it made.
   */
  async #write<T>(
    keys: readonly string[],
    call: () => Promise<T>,
    made: (result: T) => Made[] | Promise<Made[]>,
  ): Promise<T> {
    const local = this.#local;
    const unique = local ? [...new Set(keys)] : [];
    const before = unique.map((key) => local?.peek(key));
    const result = await call();
    let changes: ChangelogChange[];
    let undo: () => Promise<unknown>;
    if (local) {
      const changed = unique.flatMap((key, i) => {
        const after = local.peek(key);
        return after === before[i] ? [] : [{ key, before: before[i], after }];
      });
      changes = changed.map(({ key, after }) => ({
        key,
        record: after === undefined ? undefined : local.recordOf(key, after),
      }));
      undo = async () => {
        for (const { key, before: old, after } of changed) {
          // Only where nothing changed the key since this write.
          if (local.peek(key) !== after) continue;
          if (old === undefined) local.delete(key);
          else local.put(key, local.recordOf(key, old));
        }
      };
    } else {
      const list = await made(result);
      changes = list.map((m) => m.change);
      undo = () => Promise.allSettled(list.map((m) => m.undo?.()));
    }
    if (changes.length === 0) return result;
    try {
      await this.#sink.append(changes);
    } catch (error) {
      await undo();
      throw this.#changelogError('append', error);
    }
    return result;
  }

  #changelogError(operation: string, error: unknown): RepositoryError {
    const message = `${this.storeName} changelog ${operation} failed: ${errorMessage(error)}`;
    return new RepositoryError(message, { cause: error });
  }

  /**
   * The live record of key `i` in the open transaction: the staged one if it changed the key, else the inner
   * store's (read first). Staged records are looked up when asked, so a verb sees a change staged meanwhile.
   */
  async #current(
    keys: readonly string[],
    now: number,
  ): Promise<(i: number) => IdempotencyRecord | undefined> {
    const staged = (this.#tx as Staging).records;
    const ask = keys.flatMap((key, i) => (staged.has(key) ? [] : [i]));
    const read = new Array<IdempotencyRecord | undefined>(keys.length);
    if (ask.length > 0) {
      const held = await this.inner.getMany(
        ask.map((i) => idOfKey(keys[i] as string)),
        { now },
      );
      for (let k = 0; k < ask.length; k++) read[ask[k] as number] = held[k];
    }
    return (i) => {
      const record = staged.get(keys[i] as string);
      if (record === undefined) return read[i];
      return record !== null && isLive(record, now) ? record : undefined;
    };
  }

  /** Stages a new record for each key (unique: BaseRepository resolves repeats) that no live record holds. */
  async #stageAdds(
    entries: readonly KeyedEntry[],
    keys: readonly string[],
    options: AddOptions & { now: number },
  ): Promise<AddResult[]> {
    const current = await this.#current(keys, options.now);
    return entries.map((entry, i): AddResult => {
      const existing = current(i);
      if (existing !== undefined) return { added: false, existing };
      const record = newRecord(entry.key, entry, options, options.now);
      this.#stage(entry.key, record);
      return { added: true, record };
    });
  }

  /** Stages a change of the open transaction (callers check one is open). */
  #stage(key: string, record: IdempotencyRecord | undefined): void {
    const tx = this.#tx as Staging;
    tx.records.set(key, record ?? null);
    tx.changes.push({ key, record });
  }

  /** Writes changes to the inner store as they are, without logging; the last change per key wins. */
  async #apply(changes: readonly ChangelogChange[], now: number, bucketMs: number): Promise<number> {
    const last = new Map<string, IdempotencyRecord | undefined>();
    for (const { key, record } of changes) last.set(key, record);
    const local = this.#local;
    let live = 0;
    if (local) {
      for (const [key, record] of last) {
        if (record === undefined || !isLive(record, now)) local.delete(key);
        else {
          local.put(key, { ...record, id: key });
          live++;
        }
      }
      return live;
    }
    // Through the store's verbs: deletions, marks grouped by first-seen time and `bucketMs` of expiry (kept to
    // the bucket's end), claims one by one, each with its first-seen time as `now` (kept as first seen).
    const inner = this.inner;
    const removals: MessageId[] = [];
    const marks = new Map<string, { at: number; bucket: number; entries: AddEntry[] }>();
    const claims: [string, IdempotencyRecord][] = [];
    const dated: MessageId[] = [];
    for (const [key, record] of last) {
      if (record === undefined || !isLive(record, now)) {
        removals.push(idOfKey(key));
        continue;
      }
      live++;
      if (record.firstSeenAt !== undefined) dated.push(idOfKey(key));
      if (record.state === 'in-flight') {
        claims.push([key, record]);
        continue;
      }
      const bucket = Math.ceil(record.expiresAt / bucketMs) * bucketMs;
      const entry = entryOf(keyedEntry(key, record, true));
      const at = record.firstSeenAt ?? now;
      const group = marks.get(`${bucket}:${at}`);
      if (group) group.entries.push(entry);
      else marks.set(`${bucket}:${at}`, { at, bucket, entries: [entry] });
    }
    // Judged at its earlier first-seen time, an older state the store still holds (a claim confirmed since) would
    // count as live and keep the write out: whatever the store holds for those keys (read at time 0) goes first.
    const held = dated.length === 0 ? [] : await inner.getMany(dated, { now: 0 });
    for (let i = 0; i < held.length; i++) if (held[i] !== undefined) removals.push(dated[i] as MessageId);
    for (const id of removals) await inner.remove(id);
    for (const { at, bucket, entries } of marks.values()) {
      const ttlMs = Math.max(1, bucket - at);
      await markIds(inner, entries, { ttlMs, now: at });
    }
    for (const [key, claim] of claims) {
      const at = claim.firstSeenAt ?? now;
      const entry = entryOf(keyedEntry(key, claim, false));
      const leaseMs = Math.max(1, (claim.leaseExpiresAt ?? now) - at);
      const ttlMs = Math.max(1, claim.expiresAt - at);
      await inner.add(entry.id, { ttlMs, leaseMs, owner: claim.owner ?? '', now: at }, entry);
    }
    return live;
  }
}
