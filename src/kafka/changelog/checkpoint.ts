import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { RepositoryError } from '../../errors.js';
import type { PartitionOffsets } from './reader.js';

/** The file's format version; a file of another version is ignored (a full restore, never a wrong one). */
const VERSION = 1;

/** Numbers the temporary files of this process, so that no two saves ever share one. */
let temporaries = 0;

/**
 * The changelog offset a local store has applied, per partition, in one small JSON file written atomically
 * (temporary file, fsync, rename). Keep it with the store it describes and delete them together: a checkpoint
 * ahead of its store would skip marks. A checkpoint behind its store (a crash between store write and save) only
 * replays marks again, which is harmless.
 */
export class ChangelogCheckpoint {
  readonly #offsets: PartitionOffsets;
  /** The save in progress: saves of one checkpoint run one after the other, each writing the offsets of then. */
  #saving: Promise<void> = Promise.resolve();

  private constructor(
    /** The checkpoint file. */
    readonly path: string,
    /** The changelog topic whose offsets the file records. */
    readonly topic: string,
    offsets: PartitionOffsets,
  ) {
    this.#offsets = offsets;
  }

  /**
   * Loads the file, or starts empty when there is none, it records another topic, or it cannot be read as a
   * checkpoint (each of which means: restore from the start).
   */
  static async load(path: string, topic: string): Promise<ChangelogCheckpoint> {
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        return new ChangelogCheckpoint(path, topic, new Map());
      throw new RepositoryError(`cannot read changelog checkpoint ${path}`, { cause: error });
    }
    return new ChangelogCheckpoint(path, topic, parseCheckpoint(text, topic));
  }

  /** The offset applied for the partition, if recorded. */
  get(partition: number): number | undefined {
    return this.#offsets.get(partition);
  }

  /** Records the offset applied for the partition (saved by {@link save}). */
  set(partition: number, offset: number): void {
    this.#offsets.set(partition, offset);
  }

  /** Forgets a partition (its local state was dropped). */
  delete(partition: number): void {
    this.#offsets.delete(partition);
  }

  /** A copy of every recorded offset. */
  offsets(): PartitionOffsets {
    return new Map(this.#offsets);
  }

  /** Where to read each partition from: its recorded offset, or 0. */
  from(partitions: readonly number[]): PartitionOffsets {
    return new Map(partitions.map((p) => [p, this.#offsets.get(p) ?? 0]));
  }

  /**
   * Writes the file atomically: a crash leaves the old file or the new one, never a torn one. Saves of this
   * checkpoint run one at a time (the node saves from its join handler and from its batch loop, which may
   * overlap), and every save has a temporary file of its own, so that another checkpoint object of the same file
   * cannot rename it away either.
   */
  save(): Promise<void> {
    const next = this.#saving.then(() => this.#write());
    this.#saving = next.catch(() => undefined);
    return next;
  }

  async #write(): Promise<void> {
    const partitions: Record<string, number> = {};
    for (const [p, offset] of [...this.#offsets].sort((a, b) => a[0] - b[0])) partitions[p] = offset;
    const text = `${JSON.stringify({ version: VERSION, topic: this.topic, partitions })}\n`;
    const temporary = `${this.path}.${process.pid}.${++temporaries}.tmp`;
    try {
      await mkdir(dirname(this.path), { recursive: true });
      const file = await open(temporary, 'w');
      try {
        await file.writeFile(text, 'utf8');
        await file.sync();
      } finally {
        await file.close();
      }
      await rename(temporary, this.path);
    } catch (error) {
      await rm(temporary, { force: true }).catch(() => undefined);
      throw new RepositoryError(`cannot write changelog checkpoint ${this.path}`, { cause: error });
    }
  }
}

function parseCheckpoint(text: string, topic: string): PartitionOffsets {
  const offsets: PartitionOffsets = new Map();
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch {
    return offsets;
  }
  const { version, topic: recorded, partitions } = (data ?? {}) as Record<string, unknown>;
  if (version !== VERSION || recorded !== topic || typeof partitions !== 'object' || partitions === null) {
    return offsets;
  }
  for (const [key, value] of Object.entries(partitions)) {
    const p = Number(key);
    if (Number.isSafeInteger(p) && p >= 0 && Number.isSafeInteger(value) && (value as number) >= 0) {
      offsets.set(p, value as number);
    }
  }
  return offsets;
}
