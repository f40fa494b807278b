import type {
  ChangelogCheckpoints,
  ChangelogOffsets,
  ChangelogSource,
  ChangelogSourceRead,
  UnreadableChange,
} from '../../store/changelog.js';
import type { LoggedRepository } from './logged-repository.js';

/** Options of a {@link ChangelogRestorer}. */
export interface ChangelogRestorerOptions {
  /** Where the changelog is read back from. */
  readonly source: ChangelogSource;
  /**
   * The checkpoint of what the local store has applied (`ChangelogCheckpoint`), or a promise of it (a rejection
   * fails the first restore). Without one, a restore starts from what this restorer applied, or the start.
   */
  readonly checkpoints?: ChangelogCheckpoints | Promise<ChangelogCheckpoints>;
  /** A checkpoint that could not be written (it only makes the next restore longer); default: ignored. */
  readonly onCheckpointError?: (error: unknown, partition: number) => void;
}

/** Where a restore starts and ends, per partition: reported before the first record is read. */
export interface RestorePlan {
  /** The first offset each partition is read from. */
  readonly from: ReadonlyMap<number, number>;
  /** The end offsets captured now, which a bounded restore reads up to. */
  readonly ends: ReadonlyMap<number, number>;
}

/** Progress of a restore, after each batch of one partition. */
export interface RestoreProgress {
  readonly partition: number;
  /** The offset the partition's read resumes from after this batch. */
  readonly nextOffset: number;
  /** Live records written to the stores so far, over every partition of this restore. */
  readonly restored: number;
}

/** What {@link ChangelogRestorer.restore} does besides reading (the read's options: {@link ChangelogSourceRead}). */
export interface RestoreOptions
  extends Pick<ChangelogSourceRead, 'follow' | 'onCaughtUp' | 'signal' | 'heartbeat'> {
  /** Start offsets that win over the applied ones and the checkpoint (a tail resuming where it stopped). */
  readonly from?: ReadonlyMap<number, number>;
  /** With it, the end offsets are captured first and reported with the start offsets. */
  readonly onStart?: (plan: RestorePlan) => void;
  readonly onProgress?: (progress: RestoreProgress) => void;
  /** A changelog record that could not be read: skipped (and counted in the result), never a mark. */
  readonly onUnreadable?: (unreadable: UnreadableChange) => void;
}

/** What a restore did. */
export interface RestoreResult {
  readonly from: ReadonlyMap<number, number>;
  /** The offset each partition's store now holds the changelog up to. */
  readonly reached: ReadonlyMap<number, number>;
  /** Live records written to the stores. */
  readonly restored: number;
  /** Records skipped as unreadable. */
  readonly unreadable: number;
}

/**
 * Restore and checkpoints of logged stores (Kafka Streams' `StateRestoreCallback` and checkpoint file): reads
 * each changelog partition into its {@link LoggedRepository} from what the store holds (applied here, else the
 * checkpoint, else the start), and keeps that offset; the checkpoint only ever records offsets the store holds.
 */
export class ChangelogRestorer {
  readonly #source: ChangelogSource;
  readonly #checkpoints: Promise<ChangelogCheckpoints | undefined>;
  readonly #onCheckpointError: (error: unknown, partition: number) => void;
  /** The offset up to which each partition's store holds the changelog, as far as this process knows. */
  readonly #applied: ChangelogOffsets = new Map();

  constructor(options: ChangelogRestorerOptions) {
    this.#source = options.source;
    this.#checkpoints = Promise.resolve(options.checkpoints);
    // Observed where it is awaited; a checkpoint that cannot be loaded fails the first restore.
    this.#checkpoints.catch(() => undefined);
    this.#onCheckpointError = options.onCheckpointError ?? (() => undefined);
  }

  /**
   * The partition's store now holds the changelog up to `next` (a committed write reached both). False, and
   * nothing advanced, when `first` lies past what the store holds: another writer appended, restore the partition.
   */
  advanced(partition: number, next: number | undefined, first?: number): boolean {
    if (next === undefined) return true;
    const applied = this.#applied.get(partition);
    if (first !== undefined && applied !== undefined && first > applied) return false;
    this.#applied.set(partition, Math.max(applied ?? 0, next));
    return true;
  }

  /**
   * Reads the changelog partitions of `stores` (partition → its logged store) into them, from what each holds to
   * the end offsets captured at the start (or on, with `follow`), then records and checkpoints the offsets.
   */
  async restore(
    stores: ReadonlyMap<number, LoggedRepository>,
    options: RestoreOptions = {},
  ): Promise<RestoreResult> {
    const { from: given, onStart, onProgress, onUnreadable, ...readOptions } = options;
    const checkpoints = await this.#checkpoints;
    const partitions = [...stores.keys()];
    const from: ChangelogOffsets = new Map(
      partitions.map((p) => [p, given?.get(p) ?? this.#applied.get(p) ?? checkpoints?.get(p) ?? 0]),
    );
    if (onStart) onStart({ from, ends: await this.#source.endOffsets(partitions) });
    let restored = 0;
    let unreadable = 0;
    const reached = await this.#source.read({
      ...readOptions,
      from,
      onBatch: async (partition, changes, nextOffset) => {
        const store = stores.get(partition) as LoggedRepository;
        if (changes.length > 0) restored += await store.restore(changes);
        onProgress?.({ partition, nextOffset, restored });
      },
      onUnreadable: (bad) => {
        unreadable++;
        onUnreadable?.(bad);
      },
    });
    const result: ChangelogOffsets = new Map(partitions.map((p) => [p, reached.get(p) ?? from.get(p) ?? 0]));
    for (const [partition, offset] of result) {
      this.#applied.set(partition, offset);
      await this.checkpoint(partition);
    }
    return { from, reached: result, restored, unreadable };
  }

  /** Checkpoints the offset the partition's store holds, if known, and resolves with it (on its store's close). */
  async checkpoint(partition: number): Promise<number | undefined> {
    const offset = this.#applied.get(partition);
    if (offset === undefined) return undefined;
    try {
      const checkpoints = await this.#checkpoints;
      checkpoints?.set(partition, offset);
      await checkpoints?.save();
    } catch (error) {
      this.#onCheckpointError(error, partition);
    }
    return offset;
  }
}
