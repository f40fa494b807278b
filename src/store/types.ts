/** The id of a message as a repository sees it: text, or raw bytes (e.g. a Kafka key). */
export type MessageId = string | Uint8Array;

/** `in-flight`: claimed, the handler has not finished. `confirmed`: handled, a duplicate until it expires. */
export type RecordState = 'in-flight' | 'confirmed';

/**
 * What a repository keeps per id. Liveness is judged from these times, never by the store's own lazy expiry: an
 * in-flight record counts until `leaseExpiresAt`, a confirmed one until `expiresAt`.
 */
export interface IdempotencyRecord {
  /** The canonical key (see {@link toKey}). */
  readonly id: string;
  readonly state: RecordState;
  /** Epoch ms when a confirmed record stops being a duplicate (retention TTL). */
  readonly expiresAt: number;
  /** Epoch ms when an unconfirmed claim lapses, so a crashed worker's claim frees itself. */
  readonly leaseExpiresAt?: number;
  /** Opaque token of the claim's owner; confirm/remove with another token do nothing. */
  readonly owner?: string;
  /** Event timestamp (epoch ms) of the message that created the record, for event-time windows. */
  readonly eventTime?: number;
  /** A digest of the payload (the consumer's `fingerprint` option), telling a true duplicate from an id reuse. */
  readonly fingerprint?: string;
  /** An opaque outcome kept with a confirmed record, up to `capabilities.maxResultBytes` UTF-8 bytes. */
  readonly result?: string;
  /** The `now` (epoch ms) of the add that created the record, kept through confirm and renew; absent in 0.1.0's. */
  readonly firstSeenAt?: number;
}

/** One id to add, with the record fields that travel with it (`result`: kept by a lazy mark, not by a claim). */
export interface AddEntry extends Pick<IdempotencyRecord, 'eventTime' | 'fingerprint' | 'result'> {
  readonly id: MessageId;
}

/** How a record is written by `add`. */
export interface AddOptions {
  /** Retention: how long a confirmed id stays a duplicate, in ms. */
  readonly ttlMs: number;
  /** When set, the record is written `in-flight` with this lease (eager claim); else `confirmed` (lazy mark). */
  readonly leaseMs?: number;
  /** Owner token stored with an in-flight claim. Required with `leaseMs`. */
  readonly owner?: string;
  /**
   * The time (epoch ms) that liveness is judged against and that `ttlMs`/`leaseMs` count from. Defaults to the
   * repository's clock. Event-time deduplication passes stream time here, so state expires with the stream.
   */
  readonly now?: number;
  /**
   * The least wall-clock ms the store keeps the record before its own expiry may forget it (liveness is still
   * judged from its times). Event-time mode sets it: stream time stands still while a stream is idle.
   */
  readonly minLifetimeMs?: number;
}

/** How `markMany` writes confirmed records; the fields mean what they mean in {@link AddOptions}. */
export type MarkOptions = Pick<AddOptions, 'ttlMs' | 'now' | 'minLifetimeMs'>;

export interface ReadOptions {
  /** The time liveness is judged against; defaults to the repository's clock (see {@link AddOptions.now}). */
  readonly now?: number;
}

/** The outcome of one add: either the id was new (and is now stored) or a live record already held it. */
export type AddResult =
  | { readonly added: true; readonly record: IdempotencyRecord }
  | { readonly added: false; readonly existing: IdempotencyRecord };

/** A claim to confirm or release, identified by id and owner token. */
export interface ClaimRef {
  readonly id: MessageId;
  readonly owner: string;
}

/** A claim to confirm, with the outcome to keep in the confirmed record (see {@link IdempotencyRecord.result}). */
export type ConfirmRef = ClaimRef & { readonly result?: string };

export interface RenewOptions {
  /** The new lease, in ms from now: the claim's `leaseExpiresAt` becomes now + `leaseMs`. */
  readonly leaseMs: number;
}

export interface ConfirmOptions {
  /** Retention of the confirmed record, in ms from the confirmation. */
  readonly ttlMs: number;
  /** The outcome to keep with the confirmed record (see {@link IdempotencyRecord.result}). */
  readonly result?: string;
}

/** An answer given at once, or a promise of it when the store has to wait. */
export type MaybePromise<T> = T | Promise<T>;

/** What a repository can do; the contract suite and the consumer read this instead of guessing. */
export interface RepositoryCapabilities {
  /** Ids survive `close()` and reopening the same store. */
  readonly persistent: boolean;
  /** Several processes can share the store and still claim each id once. */
  readonly shared: boolean;
  /** Largest id accepted, in UTF-8 bytes of its canonical key. */
  readonly maxIdBytes: number;
  /** `addMany`/`getMany` are a single store round trip rather than a loop. */
  readonly nativeBatch: boolean;
  /** Longest TTL or lease the store keeps, in ms (undefined: no practical limit); a longer one is refused. */
  readonly maxTtlMs?: number;
  /** Largest `result` kept with a record, in UTF-8 bytes; the consumer keeps no larger one (`resultKept: false`). */
  readonly maxResultBytes: number;
}

/**
 * The records a store holds in this process, declared by the memory store as its `localRecords`: a logged store
 * over it (the `kafka` repository) sees which keys a call changed, replays records exactly and undoes a write
 * its changelog refused. `Held` is the store's own form of a record, opaque, compared by identity.
 */
export interface LocalRecords<Held = unknown> {
  /** What the store holds under a canonical key, live or not. */
  peek(key: string): Held | undefined;
  /** The record a held value stands for. */
  recordOf(key: string, held: Held): IdempotencyRecord;
  /** Stores a record (or a held value) under its key as it is, replacing what the key held. */
  put(key: string, held: Held | IdempotencyRecord): void;
  /** Forgets a canonical key. */
  delete(key: string): boolean;
}

/**
 * A store of message ids, with Apache Camel's verbs.
 *
 * Every method rejects with a {@link RepositoryClosedError} after `close()`, with an
 * {@link InvalidIdError} for an id it cannot store, and with a {@link RepositoryError} (keeping the
 * client's error as `cause`) when the store itself fails.
 */
export interface IdempotentRepository {
  readonly capabilities: RepositoryCapabilities;
  /** Atomically inserts the id if it is absent or its record is no longer live. */
  add(id: MessageId, options: AddOptions, entry?: Omit<AddEntry, 'id'>): Promise<AddResult>;
  /** `add` for many ids; duplicates inside the list resolve to the first occurrence. */
  addMany(entries: readonly AddEntry[], options: AddOptions): Promise<AddResult[]>;
  /**
   * Lazy mode's mark of ids just read as absent, with the store's cheapest write; afterwards a live record holds
   * each id, but a blind store may have replaced one that appeared since the read (lazy mode's known race). Per
   * position: false when a live record held the id and was kept (`raced`). Optional: else `addMany`.
   */
  markMany?(entries: readonly AddEntry[], options: MarkOptions): Promise<boolean[]>;
  /** True when a live record (in-flight or confirmed) holds the id. */
  contains(id: MessageId, options?: ReadOptions): Promise<boolean>;
  /** `contains` for many ids, one answer per input position. */
  containsMany(ids: readonly MessageId[], options?: ReadOptions): Promise<boolean[]>;
  /** The live record for the id, if any. */
  get(id: MessageId, options?: ReadOptions): Promise<IdempotencyRecord | undefined>;
  /** `get` for many ids, one answer per input position. */
  getMany(ids: readonly MessageId[], options?: ReadOptions): Promise<(IdempotencyRecord | undefined)[]>;
  /** Turns the owner's claim into a confirmed record kept for `ttlMs`, with `result`; false if gone or not theirs. */
  confirm(claim: ClaimRef, options: ConfirmOptions): Promise<boolean>;
  /** `confirm` for many claims (each with its own `result`), one answer per input position. */
  confirmMany(claims: readonly ConfirmRef[], options: { ttlMs: number }): Promise<boolean[]>;
  /**
   * Extends the owner's in-flight claim to end `leaseMs` from now, atomically like `confirm`; the consumer calls
   * it every third of the lease. Optional: without it a claim holds for its first lease only.
   */
  renew?(claim: ClaimRef, options: RenewOptions): Promise<boolean>;
  /** Deletes the record. With an owner, only that owner's in-flight claim is deleted. */
  remove(id: MessageId, owner?: string): Promise<boolean>;
  /** Deletes every record of this repository (its namespace only, for shared stores). */
  clear(): Promise<void>;
  /**
   * Calls `onPage` with every record of this namespace, live or not yet forgotten (judge with `isLive`), a page at
   * a time, for tools (`idem stats`). Not a snapshot: a record written meanwhile may be missed, one that moved seen
   * twice. Optional: a store that cannot list its ids cheaply leaves it out.
   */
  scan?(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void>;
  /** Releases connections and flushes local state. Further calls fail with RepositoryClosedError. */
  close(): Promise<void>;
}

/**
 * One open database transaction of a {@link TransactionalRepository}, as the consumer drives it. `client` is
 * what the handler writes its side effect with (`pg`'s `PoolClient`, `mysql2`'s `PoolConnection`), handed over
 * as `HandlerContext.transaction`.
 */
export interface RepositoryTransaction<Client = unknown> {
  /** The driver's connection inside the transaction: the handler's side effect goes through it. */
  readonly client: Client;
  /**
   * Opens a savepoint (one at a time) around a handler whose failure must undo its writes but keep the
   * transaction. `optimistic`: a store may only note the place; where that cannot stand in for a real one, the
   * transaction becomes rollback-only and sets {@link needsSavepoints}: the caller runs it again with real ones.
   */
  savepoint(options?: { readonly optimistic?: boolean }): Promise<void>;
  /**
   * Drops the open savepoint, keeping what was written after it; where a caught failed statement aborted the
   * transaction (PostgreSQL), it rolls back to it instead and rejects with SwallowedStatementError.
   */
  releaseSavepoint(): Promise<void>;
  /** Undoes what was written since the open savepoint (and drops it); the transaction goes on. */
  rollbackToSavepoint(): Promise<void>;
  /** Makes the end a rollback; `remove` in it then answers true without a statement (the rollback removes it). */
  rollbackOnly(): void;
  /** True once {@link rollbackOnly} was called. */
  readonly rollingBack: boolean;
  /** True once an optimistic savepoint could not stand in for a real one (see {@link savepoint}). */
  readonly needsSavepoints?: boolean;
  /**
   * Why the database rolled the whole transaction back on its own, if it did (MySQL's deadlock victim, even when
   * the handler caught the error): nothing commits, and the consumer runs the transaction again from the start.
   */
  readonly rolledBackBy?: string;
}

/** Options of {@link TransactionalRepository.transaction}. */
export interface TransactionOptions {
  /**
   * How long a claim waits, in ms, for another transaction holding the same id before it is answered
   * in-progress (the database's lock timeout). Defaults to the store's `lockTimeoutMs` option.
   */
  readonly lockTimeoutMs?: number;
}

/**
 * A repository whose records live in the user's database (PostgreSQL, MySQL), so the mark commits in the side
 * effect's own transaction. While `work` runs, the verbs called from its async context run on the
 * transaction's connection. A claim holds the id's row lock to the end: a concurrent claim waits, and past the
 * lock timeout answers `{ added: false, existing }` with an `in-flight` record (its transaction becomes
 * rollback-only), never a unique-violation error.
 */
export interface TransactionalRepository<Client = unknown> extends IdempotentRepository {
  /**
   * Runs `work` in one transaction: commits when it resolves (unless made rollback-only), rolls back when it
   * rejects, and always gives the connection back. Answers what `work` answers.
   */
  transaction<T>(
    work: (transaction: RepositoryTransaction<Client>) => Promise<T>,
    options?: TransactionOptions,
  ): Promise<T>;
}
