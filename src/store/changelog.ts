// The changelog port of a logged store, beside the store port: src/kafka/changelog and the stores build on it.
import type { IdempotencyRecord } from './types.js';

/** One write as a changelog keeps it: the record a key holds after the write, or undefined once deleted. */
export interface ChangelogChange {
  /** The canonical key (see `toKey`). */
  readonly key: string;
  /** The record the key now holds; undefined for a deletion (a tombstone). */
  readonly record: IdempotencyRecord | undefined;
}

/** Where a `LoggedRepository` appends its changes, in order: a Kafka topic partition, or `MemoryChangelog`. */
export interface ChangelogSink {
  /** Appends the changes; resolves once they are durable (acknowledged), rejects when they may not be. */
  append(changes: readonly ChangelogChange[]): Promise<void>;
  /** Forgets every change (the repository's `clear()`). */
  clear(): Promise<void>;
  /** Releases the sink's own resources; the repository calls it from `close()`. */
  close?(): Promise<void>;
}

/** Changelog offset per partition: the first offset not yet applied, or the end of a partition. */
export type ChangelogOffsets = Map<number, number>;

/** A changelog record that could not be read, and why; it was skipped. */
export interface UnreadableChange {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly reason: string;
}

/** What {@link ChangelogSource.read} reads and where the changes go. */
export interface ChangelogSourceRead {
  /** The partitions to read, each from the first offset not applied yet (0: from the start). */
  readonly from: ReadonlyMap<number, number>;
  /** Each fetched partition's readable changes in offset order, and the offset after them; awaited. */
  onBatch(partition: number, changes: readonly ChangelogChange[], nextOffset: number): Promise<void>;
  /** A record that could not be read; it is skipped, and the read goes on. */
  onUnreadable(unreadable: UnreadableChange): void;
  /** Keep reading past the end offsets captured at the start, until `signal` aborts (a tail). */
  readonly follow?: boolean;
  /** With `follow`: called once when every partition has reached the end offsets captured at the start. */
  readonly onCaughtUp?: () => void;
  /** Stops the read: a bounded read rejects with the signal's reason, a followed one resolves. */
  readonly signal?: AbortSignal;
  /** Called between fetches (a consumer group heartbeat during a long restore). */
  readonly heartbeat?: () => Promise<void>;
}

/** Where a `ChangelogRestorer` reads a logged store's changes back from (a topic read read_committed). */
export interface ChangelogSource {
  /** The changelog's name (a topic), for logs and warnings. */
  readonly topic: string;
  /** The end offsets a restore reads up to, captured now (a Kafka topic: its last stable offsets). */
  endOffsets(partitions: readonly number[]): Promise<ChangelogOffsets>;
  /** Reads `from`'s partitions up to the end offsets captured when it starts (or on, with `follow`). */
  read(options: ChangelogSourceRead): Promise<ChangelogOffsets>;
}

/** The changelog offsets a local store has applied, kept across restarts; never ahead of the store. */
export interface ChangelogCheckpoints {
  /** The offset applied for the partition, if recorded. */
  get(partition: number): number | undefined;
  /** Records the offset applied for the partition (kept by {@link save}). */
  set(partition: number, offset: number): void;
  /** Makes the recorded offsets durable. */
  save(): Promise<void>;
}
