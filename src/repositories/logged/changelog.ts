import type { ChangelogChange, ChangelogSink } from '../../store/changelog.js';

/** A changelog held in memory, for tests and the contract suite (restore a new store from its `changes`). */
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
