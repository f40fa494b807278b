import { rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError, errorMessage, RepositoryError } from '../../errors.js';
import { type NativeBatch, NativeDb, type NativeOpenOptions } from './binding.js';
import { RecentBlobs } from './blob.js';
import { KeyIndex, MAX_SLOT } from './key-index.js';
import type { RocksdbOptions } from './options.js';

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

const bucketDirName = (deadline: number): string => `b-${deadline}`;
export const isTrashDir = (name: string): boolean => TRASH_DIR.test(name);

/** The deadline of a bucket directory name, or undefined for any other entry. */
export function parseBucketDir(name: string): number | undefined {
  const match = BUCKET_DIR.exec(name);
  return match ? Number(match[1]) : undefined;
}

/** A time bucket: the RocksDB database `<path>/b-<deadline>`, deleted whole once the clock passes `deadline`. */
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

  constructor(
    readonly deadline: number,
    readonly db: NativeDb,
  ) {}

  get name(): string {
    return bucketDirName(this.deadline);
  }

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

/** The open time buckets of a store, and the key index naming which may hold a key (by slot; 0: none). */
export class BucketSet {
  readonly index: KeyIndex;
  readonly recent = new RecentBlobs();
  readonly #path: string;
  readonly #bucketMs: number;
  readonly #options: NativeOpenOptions;
  readonly #byDeadline = new Map<number, Bucket>();
  readonly #bySlot: (Bucket | undefined)[] = [];
  #unindexed: Bucket[] = [];
  #nextDeadline = Number.POSITIVE_INFINITY;
  readonly #dropping = new Set<Promise<void>>();

  constructor(path: string, settings: RocksdbOptions) {
    this.#path = path;
    this.#bucketMs = settings.bucketMs;
    this.index = new KeyIndex(settings.indexMaxMb * 1024 * 1024, settings.expectedIds ?? 0);
    this.#options = {
      createIfMissing: true,
      compression: false,
      walCompression: false,
      cacheSize: settings.blockCacheMb * 1024 * 1024,
      optimize: 'point-lookup',
      filterPolicy: settings.bloomBitsPerKey > 0 ? `bloomfilter:${settings.bloomBitsPerKey}:false` : '',
      ...(settings.memtableMb !== undefined
        ? { compaction: 'level' as const, memtableMemoryBudget: settings.memtableMb * 1024 * 1024 }
        : {}),
    };
  }

  /** Ids indexed since the key index was last saved (a startup's scan too); reset by the periodic snapshot. */
  notedSinceSnapshot = 0;

  /** Open buckets, earliest end first. */
  sorted(): Bucket[] {
    return [...this.#byDeadline.values()].sort((a, b) => a.deadline - b.deadline);
  }

  bySlot(slot: number): Bucket | undefined {
    return this.#bySlot[slot];
  }

  get unindexed(): readonly Bucket[] {
    return this.#unindexed;
  }

  /**
   * Indexes the key with this hash in blob `blob` of `bucket`, before the write. False when the bucket is not
   * indexed or the index is full (the bucket becomes unindexed): the record goes under its own key.
   */
  noteKey(hash: number, bucket: Bucket, blob: number): boolean {
    if (!bucket.indexed) return false;
    if (this.index.insert(hash, bucket.slot, blob)) {
      this.notedSinceSnapshot++;
      return true;
    }
    this.markUnindexed(bucket);
    return false;
  }

  /** The bucket for a record kept `lifetimeMs` longer, opened if new. Buckets are dated on the wall clock. */
  async bucketFor(lifetimeMs: number, wall: number): Promise<Bucket> {
    if (!Number.isFinite(lifetimeMs)) throw new ConfigError('ttlMs', `must be a finite number of ms`);
    const lifetime = Math.max(0, lifetimeMs);
    const deadline = bucketDeadline(wall + lifetime, bucketWidth(lifetime, this.#bucketMs));
    const existing = this.#byDeadline.get(deadline);
    if (existing !== undefined) return existing;
    const bucket = await this.open(deadline);
    this.add(bucket);
    return bucket;
  }

  /** Opens (creating if needed) the bucket ending at `deadline`, without adding it to the set. */
  async open(deadline: number): Promise<Bucket> {
    try {
      const db = await NativeDb.open(join(this.#path, bucketDirName(deadline)), this.#options);
      return new Bucket(deadline, db);
    } catch (error) {
      throw new RepositoryError(
        `rocksdb bucket ${this.#path}/${bucketDirName(deadline)} could not be opened: ${errorMessage(error)}`,
        { cause: error },
      );
    }
  }

  /**
   * Adds an opened bucket under the lowest free slot (the caller indexes its keys if it is `indexed`), or under
   * the slot a snapshot restored its index entries in.
   */
  add(bucket: Bucket, slot = this.#freeSlot(), indexed = slot !== 0 && this.index.enabled): void {
    bucket.slot = slot;
    bucket.indexed = indexed;
    this.#byDeadline.set(bucket.deadline, bucket);
    if (bucket.slot !== 0) this.#bySlot[bucket.slot] = bucket;
    if (!bucket.indexed) this.#unindexed.push(bucket);
    this.#nextDeadline = Math.min(this.#nextDeadline, bucket.deadline);
  }

  markUnindexed(bucket: Bucket): void {
    if (!bucket.indexed) return;
    bucket.indexed = false;
    this.#unindexed.push(bucket);
  }

  /** Drops every bucket whose end has passed; their directories are deleted in the background. */
  dropExpired(wall: number): void {
    if (wall < this.#nextDeadline) return;
    for (const bucket of [...this.#byDeadline.values()]) {
      if (bucket.deadline > wall) continue;
      this.#unregister(bucket);
      // Cleanup, not correctness: a failure leaves the directory for the next open to remove.
      const drop: Promise<void> = bucket
        .destroy(this.#path)
        .catch(() => undefined)
        .finally(() => this.#dropping.delete(drop));
      this.#dropping.add(drop);
    }
  }

  async settle(): Promise<void> {
    await Promise.all(this.#dropping);
  }

  async destroyAll(): Promise<void> {
    const buckets = [...this.#byDeadline.values()];
    for (const bucket of buckets) this.#unregister(bucket);
    this.index.clear();
    await Promise.all([...buckets.map((b) => b.destroy(this.#path)), ...this.#dropping]);
  }

  /** Closes every bucket's database; pending writes to them are discarded from now on. */
  async closeAll(): Promise<PromiseSettledResult<void>[]> {
    const buckets = [...this.#byDeadline.values()];
    for (const bucket of buckets) bucket.dropped = true;
    return Promise.allSettled(buckets.map((b) => b.db.close()));
  }

  #unregister(bucket: Bucket): void {
    bucket.dropped = true;
    this.recent.clear(); // its slot may be reused
    this.#byDeadline.delete(bucket.deadline);
    if (bucket.slot !== 0) {
      this.#bySlot[bucket.slot] = undefined;
      this.index.removeSlot(bucket.slot);
    }
    this.#unindexed = this.#unindexed.filter((b) => b !== bucket);
    this.#nextDeadline = Math.min(Number.POSITIVE_INFINITY, ...[...this.#byDeadline.keys()]);
  }

  /** The lowest bucket slot not in use, or 0 (no index entries) past MAX_SLOT. */
  #freeSlot(): number {
    for (let slot = 1; slot <= MAX_SLOT; slot++) if (this.#bySlot[slot] === undefined) return slot;
    return 0;
  }
}
