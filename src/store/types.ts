/** The id of a message as a repository sees it: text, or raw bytes (e.g. a Kafka key). */
export type MessageId = string | Uint8Array;

/** `in-flight`: claimed, the handler has not finished. `confirmed`: handled, a duplicate until it expires. */
export type RecordState = 'in-flight' | 'confirmed';

/**
 * What a repository keeps per id.
 *
 * Liveness is decided by the repository itself from these times, never by the store's own lazy expiry:
 * an in-flight record counts until `leaseExpiresAt`, a confirmed one until `expiresAt`.
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
  /**
   * An opaque serialized outcome kept with a confirmed record (the consumer's `storeResult` and
   * `removeOnFailure: false` options encode the handler's value or failure into it). Stores only keep and
   * return it, up to `capabilities.maxResultBytes` UTF-8 bytes.
   */
  readonly result?: string;
  /**
   * Epoch ms when the id was first seen: the `now` of the `add` (claim or lazy mark) that created this record, on
   * the clock liveness is judged by (`AddOptions.now`, or the repository's). Kept through confirm, renew and a
   * stored result; a record written after an old one lapsed, expired or was removed has its own. Absent on a
   * record written by a version that did not keep it (0.1.0): its first-seen time is unknown.
   */
  readonly firstSeenAt?: number;
}

/** One id to add, with the optional record fields that travel with it. */
export interface AddEntry {
  readonly id: MessageId;
  readonly eventTime?: number;
  readonly fingerprint?: string;
  /** The outcome to keep with a lazy mark (see {@link IdempotencyRecord.result}); ignored for a claim. */
  readonly result?: string;
}

/** How a record is written by `add`. */
export interface AddOptions {
  /** Retention: how long a confirmed id stays a duplicate, in ms. */
  readonly ttlMs: number;
  /**
   * When set, the record is written `in-flight` with this lease (eager claim).
   * When absent, it is written `confirmed` straight away (lazy mark).
   */
  readonly leaseMs?: number;
  /** Owner token stored with an in-flight claim. Required with `leaseMs`. */
  readonly owner?: string;
  /**
   * The time (epoch ms) that liveness is judged against and that `ttlMs`/`leaseMs` count from. Defaults to the
   * repository's clock. Event-time deduplication passes stream time here, so state expires with the stream.
   */
  readonly now?: number;
  /**
   * The least wall-clock time, in ms, that the store keeps the record before its own garbage collection
   * (PX, `USING TTL`, TTL attributes, buckets) may forget it, whatever `expiresAt` says. Liveness is still
   * judged from the record's times. Event-time mode sets it: its `now` is stream time, which stands still while
   * a stream is idle, but the store's clock does not.
   */
  readonly minLifetimeMs?: number;
}

/**
 * How `markMany` writes: confirmed records, kept `ttlMs` from `now`. The fields mean what they mean in
 * {@link AddOptions}; a mark never carries a lease or an owner.
 */
export type MarkOptions = Pick<AddOptions, 'ttlMs' | 'now' | 'minLifetimeMs'>;

/** Options of read calls. */
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

/** Options of `renew`. */
export interface RenewOptions {
  /** The new lease, in ms from now: the claim's `leaseExpiresAt` becomes now + `leaseMs`. */
  readonly leaseMs: number;
}

/** Options of `confirm`. */
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
  /**
   * Longest TTL or lease the store can keep, in ms; undefined when it has no practical limit. The consumer
   * refuses a `ttlMs` or `leaseMs` above it rather than let the store cut it short.
   */
  readonly maxTtlMs?: number;
  /**
   * Largest `result` kept with a record, in UTF-8 bytes. The consumer does not store a larger one (the
   * message is still handled once; its result says `resultKept: false`). Each store documents its choice.
   */
  readonly maxResultBytes: number;
}

/**
 * Direct access to the records a store holds in this process, declared by the memory store as its `localRecords`:
 * a store that keeps its durable copy elsewhere (a logged store over it: the `kafka` repository) uses the map as
 * its local index, to see which keys a call changed, replay records exactly as written and undo a write its
 * durable store refused. `Held` is the store's own form of a record, opaque outside it, compared by identity.
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
   * Lazy mode's mark: stores confirmed records for ids the caller has just read as absent, with the cheapest
   * write the store offers (see each store). Unlike `add` it need not be atomic, and a store may write blind:
   * after it resolves every id is held by a live record (it never leaves an id claimable), but it may have
   * replaced a record that appeared since the caller's read (a concurrent worker's mark or claim of the same id:
   * lazy mode's known race, which that worker also handled). One answer per position: false when the store saw
   * a live record already holding the id and kept it (the race, reported as `raced`); true when this call wrote
   * the record (a blind store always answers true). Optional, so a repository written before it still works:
   * the consumer falls back to `addMany`.
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
  /**
   * Turns the owner's in-flight claim into a confirmed record kept for `ttlMs`, keeping `result` with it.
   * False if the claim is gone or not theirs.
   */
  confirm(claim: ClaimRef, options: ConfirmOptions): Promise<boolean>;
  /** `confirm` for many claims (each with its own `result`), one answer per input position. */
  confirmMany(claims: readonly ConfirmRef[], options: { ttlMs: number }): Promise<boolean[]>;
  /**
   * Extends the owner's in-flight claim: its lease ends `leaseMs` from now (its retention and fields are kept).
   * Owner-checked and atomic like `confirm`: false when the claim is gone, confirmed, or another owner's (it
   * lapsed and was taken over). The consumer calls it every third of the lease while a handler runs, so a slow
   * handler keeps its claim. Optional, so a repository written before it still works: its claims then hold only
   * for their first lease (the consumer warns once).
   */
  renew?(claim: ClaimRef, options: RenewOptions): Promise<boolean>;
  /** Deletes the record. With an owner, only that owner's in-flight claim is deleted. */
  remove(id: MessageId, owner?: string): Promise<boolean>;
  /** Deletes every record of this repository (its namespace only, for shared stores). */
  clear(): Promise<void>;
  /**
   * Calls `onPage` with every record this repository holds (its namespace only, for shared stores), a page at a
   * time, and resolves after the last page: for tools that look at a whole store (`idem stats`), never for the
   * message path. It includes records that are no longer live but not yet forgotten: judge them with their
   * times (`isLive`). Not a snapshot: a record written or removed while it runs may be seen or missed, and a
   * store may report a record twice if it moved. Optional, declared by its presence like `markMany` and
   * `renew`: a store that cannot list its ids cheaply leaves it out, and tools say so.
   */
  scan?(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void>;
  /** Releases connections and flushes local state. Further calls fail with RepositoryClosedError. */
  close(): Promise<void>;
}

/**
 * One open database transaction of a {@link TransactionalRepository}, as the consumer drives it. `client` is
 * what the user's handler writes its side effect with (for `pg`, the `PoolClient` inside `BEGIN`; for
 * `mysql2`, the `PoolConnection`), handed over as `HandlerContext.transaction`.
 */
export interface RepositoryTransaction<Client = unknown> {
  /** The driver's connection inside the transaction: the handler's side effect goes through it. */
  readonly client: Client;
  /**
   * Opens a savepoint (one at a time): the consumer sets one around a handler whose failure must undo the
   * handler's writes but keep the transaction (a batch transaction, or a failure kept with the id).
   *
   * `optimistic`: a store may set none and only note the place. Its release then keeps the writes as a real
   * savepoint's would, and a rollback to it works while nothing was sent since. When it cannot stand in for a real
   * one (something was sent since and must be undone, or the transaction broke), the store makes the transaction
   * rollback-only and sets {@link needsSavepoints}: the caller runs the transaction again with real ones. A store
   * may always set a real savepoint instead.
   */
  savepoint(options?: { readonly optimistic?: boolean }): Promise<void>;
  /**
   * Drops the open savepoint, keeping what was written after it. When a statement after it failed, its error was
   * caught, and the database refuses the transaction's further statements (PostgreSQL's aborted transaction),
   * it rolls back to the savepoint instead (the transaction goes on) and rejects with SwallowedStatementError.
   */
  releaseSavepoint(): Promise<void>;
  /** Undoes what was written since the open savepoint (and drops it); the transaction goes on. */
  rollbackToSavepoint(): Promise<void>;
  /**
   * Makes the end of the transaction a rollback instead of a commit (a failed handler, a busy claim). From then
   * on `remove` in this transaction answers true without a statement: the rollback takes the claim away, and a
   * failed statement of the handler may have aborted the transaction already.
   */
  rollbackOnly(): void;
  /** True once {@link rollbackOnly} was called. */
  readonly rollingBack: boolean;
  /**
   * True once an optimistic savepoint could not stand in for a real one (see {@link savepoint}): the transaction
   * is rollback-only, and only a run with real savepoints can keep its other writes. Optional: false when absent.
   */
  readonly needsSavepoints?: boolean;
  /**
   * Why the database rolled this whole transaction back on its own while the work ran, if it did: MySQL does so
   * to a deadlock victim, even when the deadlocked statement was the handler's own and the handler caught its
   * error. Nothing of the transaction commits then (the end is a ROLLBACK, or `transaction()` rejects), and the
   * consumer runs the transaction again from the start. Optional: a store whose database never does this (a
   * failed PostgreSQL statement aborts the transaction but leaves it open) leaves it undefined.
   */
  readonly rolledBackBy?: string;
}

/** Options of {@link TransactionalRepository.transaction}. */
export interface TransactionOptions {
  /**
   * How long a claim waits, in ms, for another open transaction that holds the same id (the database's lock
   * timeout) before the claim is answered in-progress. Defaults to the store's `lockTimeoutMs` option.
   */
  readonly lockTimeoutMs?: number;
}

/**
 * A repository whose records live in the same database as the user's data (PostgreSQL, MySQL), so the mark can
 * commit in the side effect's own transaction: one commit holds both, a crash leaves neither.
 *
 * While `work` runs, every verb of this repository called from `work`'s async context runs on the transaction's
 * connection (the store keeps the transaction in an AsyncLocalStorage); verbs called from elsewhere use the pool
 * as usual. A claim made inside the transaction holds the id's row lock until the end: a concurrent claim of the
 * same id waits for it, and when that takes longer than the lock timeout the claim answers
 * `{ added: false, existing }` with an `in-flight` record (the id is in progress) and the waiting transaction
 * becomes rollback-only. Never a unique-violation error, which would abort the caller's transaction.
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
