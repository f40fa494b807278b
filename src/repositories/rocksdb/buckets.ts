import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { NativeBatch } from './binding.js';
import { NativeDb, type NativeOpenOptions } from './binding.js';

/** Bucket widths a store picks from, so buckets of different widths still share their end times. */
const BUCKET_STEPS_MS = [10_000, 60_000, 600_000, 3_600_000, 21_600_000, 86_400_000];

/**
 * Width of the bucket for a record kept `lifetimeMs` longer: the widest step of the ladder no larger than a
 * quarter of the lifetime (storage lingers at most ~25% past the record's end), never wider than `maxMs`.
 */
export function bucketWidth(lifetimeMs: number, maxMs: number): number {
  const target = lifetimeMs / 4;
  if (maxMs <= target) return maxMs;
  let width = Math.min(BUCKET_STEPS_MS[0] as number, maxMs);
  for (const step of BUCKET_STEPS_MS) if (step < maxMs && step <= target) width = step;
  return width;
}

/** End of the bucket (a multiple of `width`) that holds a record forgettable at `until`: strictly after it. */
export function bucketDeadline(until: number, width: number): number {
  return (Math.floor(until / width) + 1) * width;
}

const BUCKET_DIR = /^b-(\d+)$/;
/** A bucket directory being deleted: `trash-b-<deadline>-<pid>-<ms>`; a leftover (crash mid-delete) is removed on open. */
const TRASH_DIR = /^trash-b-\d+-\d+-\d+$/;

/** Directory name of the bucket ending at `deadline`. */
export function bucketDirName(deadline: number): string {
  return `b-${deadline}`;
}

/** Whether `name` is a bucket directory's name. */
export function isBucketDir(name: string): boolean {
  return BUCKET_DIR.test(name);
}

/** Whether `name` is the name the store gives a bucket directory it is deleting. */
export function isTrashDir(name: string): boolean {
  return TRASH_DIR.test(name);
}

/** The deadline of a bucket directory name, or undefined for any other entry. */
export function parseBucketDir(name: string): number | undefined {
  const match = BUCKET_DIR.exec(name);
  return match ? Number(match[1]) : undefined;
}

/**
 * One time bucket: a RocksDB database in `<path>/b-<deadline>` holding the records that may be forgotten before
 * `deadline`; once the clock passes it, the whole directory is deleted.
 */
export class Bucket {
  /** Set when dropped or closed; pending writes to it are discarded. */
  dropped = false;
  /** The bucket's id in the key index; 0 when it has none. */
  slot = 0;
  /** False when the key index does not hold all of this bucket's keys: every lookup must then read it. */
  indexed = false;
  /** The highest blob number written (or being written) to this bucket. */
  lastBlob = 0;
  /** Write batches reused by every write of the bucket (records, then tombstones), created on first use. */
  readonly batches: NativeBatch[] = [];

  private constructor(
    readonly deadline: number,
    readonly db: NativeDb,
  ) {}

  get name(): string {
    return bucketDirName(this.deadline);
  }

  /** Opens (creating if needed) the bucket directory under `storePath`. */
  static async open(storePath: string, deadline: number, options: NativeOpenOptions): Promise<Bucket> {
    return new Bucket(deadline, await NativeDb.open(join(storePath, bucketDirName(deadline)), options));
  }

  /** Closes the database and deletes its directory. */
  async destroy(storePath: string): Promise<void> {
    this.dropped = true;
    await this.db.close();
    await removeDir(storePath, this.name);
  }
}

/** Deletes `<storePath>/<name>`: renamed first, so a crash mid-delete never leaves a half bucket behind. */
export async function removeDir(storePath: string, name: string): Promise<void> {
  const trash = join(storePath, `trash-${name}-${process.pid}-${Date.now()}`);
  await rename(join(storePath, name), trash);
  await rm(trash, { recursive: true, force: true });
}
