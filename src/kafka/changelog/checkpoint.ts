import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { RepositoryError } from '../../errors.js';
import { SerialQueue } from '../port/index.js';
import type { PartitionOffsets } from './reader.js';

/** The file's format version; a file of another version is ignored (a full restore, never a wrong one). */
const VERSION = 1;

/** Numbers the temporary files of this process, so that no two saves ever share one. */
let temporaries = 0;

/**
 * The changelog offset a local store has applied, per partition, in a JSON file written atomically. Keep and
 * delete it with its store: ahead of the store it would skip marks; behind it (a crash) it only replays some.
 */
export class ChangelogCheckpoint {
  readonly #saving = new SerialQueue();

  private constructor(
    readonly path: string,
    /** The changelog topic whose offsets the file records. */
    readonly topic: string,
    private readonly applied: PartitionOffsets,
  ) {}

  /** Loads the file; empty (restore from the start) when there is none, or it is another topic's or unreadable. */
  static async load(path: string, topic: string): Promise<ChangelogCheckpoint> {
    const text = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined;
      throw new RepositoryError(`cannot read changelog checkpoint ${path}`, { cause: error });
    });
    const offsets = text === undefined ? new Map<number, number>() : parseCheckpoint(text, topic);
    return new ChangelogCheckpoint(path, topic, offsets);
  }

  get(partition: number): number | undefined {
    return this.applied.get(partition);
  }

  /** Records the offset applied for the partition (saved by {@link save}). */
  set(partition: number, offset: number): void {
    this.applied.set(partition, offset);
  }

  /** A copy of every recorded offset. */
  offsets(): PartitionOffsets {
    return new Map(this.applied);
  }

  /** Where to read each partition from: its recorded offset, or 0. */
  from(partitions: readonly number[]): PartitionOffsets {
    return new Map(partitions.map((p) => [p, this.applied.get(p) ?? 0]));
  }

  /**
   * Writes the file atomically (temporary file, fsync, rename). Saves run one at a time (the node saves from its
   * join handler and its batch loop), each with a temporary file of its own, which no other object renames away.
   */
  save(): Promise<void> {
    return this.#saving.run(() => this.#write());
  }

  async #write(): Promise<void> {
    const partitions: Record<string, number> = {};
    for (const [p, offset] of [...this.applied].sort((a, b) => a[0] - b[0])) partitions[p] = offset;
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
