import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { BucketSet } from './bucket-set.js';
import { type Bucket, isTrashDir, parseBucketDir, removeDir } from './buckets.js';
import {
  INDEX_FILE,
  readIndexFile,
  removeIndexFile,
  type SnapshotBucket,
  writeIndexFile,
} from './index-file.js';
import { hashKey } from './key-index.js';

/**
 * Opens the buckets on disk (deleting expired ones and leftovers of interrupted deletes) and fills the key
 * index: from the snapshot of the last graceful close where a bucket is unchanged since, by scanning its
 * keys otherwise.
 */
export async function loadBuckets(buckets: BucketSet, path: string, wall: number): Promise<void> {
  const deadlines: number[] = [];
  for (const name of await readdir(path)) {
    const deadline = parseBucketDir(name);
    if (isTrashDir(name)) await rm(join(path, name), { recursive: true, force: true });
    else if (deadline !== undefined && deadline <= wall) await removeDir(path, name);
    else if (deadline !== undefined) deadlines.push(deadline);
  }
  const opened = await Promise.allSettled(deadlines.map((d) => buckets.open(d)));
  const found = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const failed = opened.find((r) => r.status === 'rejected');
  if (failed !== undefined) {
    await Promise.allSettled(found.map((b) => b.db.close()));
    throw (failed as PromiseRejectedResult).reason;
  }

  const index = buckets.index;
  const snapshot = index.enabled ? await readIndexFile(join(path, INDEX_FILE)) : undefined;
  const restored =
    snapshot !== undefined && index.restore(snapshot.hashes, snapshot.slots, snapshot.live, snapshot.used);
  const known = new Map<string, SnapshotBucket>(restored ? snapshot.buckets.map((b) => [b.name, b]) : []);
  const rescan: Bucket[] = [];
  for (const bucket of found) {
    const saved = known.get(bucket.name);
    if (saved && saved.identity === bucket.db.identity && saved.sequence === bucket.db.sequence) {
      buckets.restore(bucket, saved.slot, saved.indexed);
    } else {
      rescan.push(bucket);
    }
  }
  // Entries of buckets the snapshot knew but that are gone or changed are forgotten before slots are reused.
  for (const saved of known.values()) {
    if (buckets.bySlot(saved.slot)?.name !== saved.name) index.removeSlot(saved.slot);
  }
  for (const bucket of rescan) {
    buckets.add(bucket);
    if (bucket.indexed) await scan(buckets, bucket);
  }
}

/** Indexes every key of the bucket; if the index fills up, the bucket is read on every lookup instead. */
async function scan(buckets: BucketSet, bucket: Bucket): Promise<void> {
  for await (const keys of bucket.db.keys()) {
    for (const key of keys) if (!buckets.noteKey(hashKey(key), bucket)) return;
  }
}

/** Writes the key index snapshot that the next `loadBuckets` starts from (on a graceful close). */
export async function saveIndex(buckets: BucketSet, path: string): Promise<void> {
  const saved = buckets.sorted().map((b) => ({
    name: b.name,
    slot: b.slot,
    identity: b.db.identity,
    sequence: b.db.sequence,
    indexed: b.indexed,
  }));
  await writeIndexFile(join(path, INDEX_FILE), buckets.index, saved);
}

/** Deletes the key index snapshot (the store was cleared). */
export async function removeIndex(path: string): Promise<void> {
  await removeIndexFile(join(path, INDEX_FILE));
}
