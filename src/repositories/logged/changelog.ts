import type { IdempotencyRecord } from '../types.js';

/** One write as a changelog keeps it: the record a key holds after the write, or undefined once deleted. */
export interface ChangelogChange {
  /** The canonical key (see `toKey`). */
  readonly key: string;
  /** The record the key now holds; undefined for a deletion (a tombstone). */
  readonly record: IdempotencyRecord | undefined;
}

/**
 * Where a {@link LoggedRepository} appends its changes, in the order they were decided. A Kafka topic partition
 * in the node and the `kafka` repository; an in-memory list in tests ({@link MemoryChangelog}).
 */
export interface ChangelogSink {
  /** Appends the changes; resolves once they are durable (acknowledged), rejects when they may not be. */
  append(changes: readonly ChangelogChange[]): Promise<void>;
  /** Forgets every change (the repository's `clear()`). */
  clear(): Promise<void>;
  /** Releases the sink's own resources; the repository calls it from `close()`. */
  close?(): Promise<void>;
}

/**
 * A changelog held in memory, for tests and the contract suite: what a store rebuilt from it (a new inner store
 * restored with {@link MemoryChangelog.changes}) must hold is exactly what the logged store held.
 */
export class MemoryChangelog implements ChangelogSink {
  #changes: ChangelogChange[] = [];
  /** Appends that fail from now on, with this error (tests of a changelog that refuses writes). */
  failing: Error | undefined;

  /** Every change appended since the last clear, in order. */
  get changes(): readonly ChangelogChange[] {
    return this.#changes;
  }

  async append(changes: readonly ChangelogChange[]): Promise<void> {
    if (this.failing) throw this.failing;
    for (const change of changes) this.#changes.push(change);
  }

  async clear(): Promise<void> {
    this.#changes = [];
  }
}
