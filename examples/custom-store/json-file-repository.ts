/**
 * A store written outside the library, as a user would write one: only the package's public exports
 * (`BaseRepository`, `isLive`, the types), nothing from its source. It keeps the records of one namespace in one
 * JSON file, rewritten (to a temporary file, then renamed) after every change. It is persistent but not shared:
 * every operation runs to completion without an await in between, so one process sees each add as atomic,
 * while two processes on one file would not.
 *
 * docs/own-store.md walks through it; test/custom-store.test.ts runs the contract suite against it.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import {
  type AddOptions,
  type AddResult,
  BaseRepository,
  type IdempotencyRecord,
  isLive,
  type KeyedClaim,
  type KeyedEntry,
  MAX_ID_BYTES,
  type RepositoryCapabilities,
} from 'idempotent-consumer';

/** Where the store keeps its namespace. */
export interface JsonFileRepositoryOptions {
  /** The JSON file of this namespace; created on the first write. */
  readonly path: string;
  /** Clock in epoch ms (tests step over TTLs with it). */
  readonly clock?: () => number;
}

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** An idempotency store in one JSON file: small, persistent, for one process. */
export class JsonFileRepository extends BaseRepository {
  /** What the store can do; the contract suite checks the instance declares the same. */
  static readonly capabilities: RepositoryCapabilities = {
    persistent: true,
    shared: false,
    maxIdBytes: MAX_ID_BYTES,
    nativeBatch: true,
    // The results a consumer keeps (storeResult) are strings in the JSON file; 1 MiB keeps the file rewrite cheap.
    maxResultBytes: 1_048_576,
  };
  readonly capabilities = JsonFileRepository.capabilities;
  protected readonly storeName = 'json-file';
  readonly #path: string;
  readonly #records: Map<string, IdempotencyRecord>;

  private constructor(options: JsonFileRepositoryOptions, records: Map<string, IdempotencyRecord>) {
    super(options);
    this.#path = options.path;
    this.#records = records;
  }

  /** Opens the file's records, or starts empty when the file does not exist yet. */
  static async open(options: JsonFileRepositoryOptions): Promise<JsonFileRepository> {
    const records = existsSync(options.path)
      ? new Map(
          Object.entries(JSON.parse(readFileSync(options.path, 'utf8')) as Record<string, IdempotencyRecord>),
        )
      : new Map<string, IdempotencyRecord>();
    return new JsonFileRepository(options, records);
  }

  // BaseRepository has validated the ids, turned them into unique keys and read the clock: what is left is storage.

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    const results = entries.map((entry): AddResult => {
      const existing = this.#records.get(entry.key);
      if (existing !== undefined && isLive(existing, now)) return { added: false, existing };
      const record: Mutable<IdempotencyRecord> = {
        id: entry.key,
        state: 'confirmed',
        expiresAt: now + options.ttlMs,
        // When the id was first seen (`idem inspect` reports it); confirm and renew keep it.
        firstSeenAt: now,
      };
      if (options.leaseMs !== undefined) {
        record.state = 'in-flight';
        record.leaseExpiresAt = now + options.leaseMs;
        record.owner = options.owner;
      }
      if (entry.eventTime !== undefined) record.eventTime = entry.eventTime;
      if (entry.fingerprint !== undefined) record.fingerprint = entry.fingerprint;
      // A lazy mark (no lease) carries the handler's kept result; a claim gets its result at confirm.
      if (entry.result !== undefined && options.leaseMs === undefined) record.result = entry.result;
      this.#records.set(entry.key, record);
      return { added: true, record };
    });
    if (results.some((r) => r.added)) this.#save(now);
    return results;
  }

  protected async doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    return keys.map((key) => {
      const record = this.#records.get(key);
      return record !== undefined && isLive(record, now) ? record : undefined;
    });
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]> {
    const confirmed = claims.map(({ key, owner, result }) => {
      const record = this.#records.get(key);
      // Only the owner's claim: a lapsed claim that someone else took over is no longer ours to confirm.
      if (record === undefined || record.state !== 'in-flight' || record.owner !== owner) return false;
      const { leaseExpiresAt: _lease, owner: _owner, ...rest } = record;
      const done: Mutable<IdempotencyRecord> = { ...rest, state: 'confirmed', expiresAt: now + ttlMs };
      if (result !== undefined) done.result = result;
      this.#records.set(key, done);
      return true;
    });
    if (confirmed.includes(true)) this.#save(now);
    return confirmed;
  }

  protected override async doRenew(
    key: string,
    owner: string,
    leaseMs: number,
    now: number,
  ): Promise<boolean> {
    const record = this.#records.get(key);
    // Only the owner's claim, as for a confirm: the lease moves, nothing else does.
    if (record === undefined || record.state !== 'in-flight' || record.owner !== owner) return false;
    this.#records.set(key, { ...record, leaseExpiresAt: now + leaseMs });
    this.#save(now);
    return true;
  }

  protected async doRemove(key: string, owner: string | undefined, now: number): Promise<boolean> {
    const record = this.#records.get(key);
    if (record === undefined) return false;
    if (owner !== undefined && (record.state !== 'in-flight' || record.owner !== owner)) return false;
    this.#records.delete(key);
    this.#save(now);
    return true;
  }

  protected async doClear(): Promise<void> {
    this.#records.clear();
    this.#save(this.clock());
  }

  protected async doClose(): Promise<void> {
    this.#records.clear();
  }

  /**
   * Writes every record still needed. An in-flight record is kept until its retention ends too, not only its
   * lease, so an owner whose handler outlived the lease can still confirm it when nobody took the id over. A call's
   * `now` may be stream time rather than the clock (event-time mode), so a record is dropped only when it is dead
   * by both.
   */
  #save(now: number): void {
    const before = Math.min(now, this.clock());
    const kept: Record<string, IdempotencyRecord> = {};
    for (const [key, record] of this.#records) {
      if (Math.max(record.expiresAt, record.leaseExpiresAt ?? 0) > before) kept[key] = record;
      else this.#records.delete(key);
    }
    mkdirSync(dirname(this.#path), { recursive: true });
    writeFileSync(`${this.#path}.tmp`, JSON.stringify(kept));
    renameSync(`${this.#path}.tmp`, this.#path);
  }
}
