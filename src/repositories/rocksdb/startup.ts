import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { endianness } from 'node:os';
import { join } from 'node:path';
import { BLOB_KEYS_FROM, BLOB_KEYS_TO, blobEntries, blobHashes, blobKey, blobNumber } from './blob.js';
import { type Bucket, type BucketSet, isTrashDir, parseBucketDir, removeDir } from './bucket-set.js';
import { hashKey, type IndexSegmentData, type KeyIndex } from './key-index.js';

/** How a store's key index was filled at open: bucket counts by how. */
export interface StartupSummary {
  /** A saved index (of a graceful close or a periodic snapshot) was used. */
  readonly snapshot: boolean;
  /** Buckets unchanged since the snapshot. */
  readonly fromSnapshot: number;
  /** Buckets written since the snapshot: only their later blobs were scanned. */
  readonly caughtUp: number;
  /** Buckets scanned whole (no snapshot knew them, or they changed in a way a catch-up cannot follow). */
  readonly rescanned: number;
}

/**
 * Opens the buckets on disk (deleting expired ones and leftovers of interrupted deletes) and fills the key
 * index: from the last snapshot where a bucket is unchanged since, by scanning its keys otherwise.
 */
export async function loadBuckets(buckets: BucketSet, path: string, wall: number): Promise<StartupSummary> {
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
  const restored = snapshot !== undefined && index.restore(snapshot.segments);
  const known = new Map<string, SnapshotBucket>(restored ? snapshot.buckets.map((b) => [b.name, b]) : []);
  const rescan: Bucket[] = [];
  const catchUp: Bucket[] = [];
  for (const bucket of found) {
    const saved = known.get(bucket.name);
    if (saved === undefined || saved.identity !== bucket.db.identity) {
      rescan.push(bucket);
      continue;
    }
    if (saved.sequence !== bucket.db.sequence) {
      // Written since the snapshot (a crash followed): only its later blobs are new, if it holds nothing else.
      if (!saved.indexed || !(await onlyBlobs(bucket))) {
        rescan.push(bucket);
        continue;
      }
      catchUp.push(bucket);
    }
    buckets.add(bucket, saved.slot, saved.indexed);
    bucket.lastBlob = saved.lastBlob;
  }
  // Entries of buckets the snapshot knew but that are gone or changed are forgotten before slots are reused.
  for (const saved of known.values()) {
    if (buckets.bySlot(saved.slot)?.name !== saved.name) index.removeSlot(saved.slot);
  }
  for (const bucket of rescan) {
    buckets.add(bucket);
    await scan(buckets, bucket);
  }
  for (const bucket of catchUp) await scan(buckets, bucket, blobKey(bucket.lastBlob + 1));
  return {
    snapshot: restored,
    fromSnapshot: found.length - rescan.length - catchUp.length,
    caughtUp: catchUp.length,
    rescanned: rescan.length,
  };
}

/** True when the bucket holds only blobs: then every write since a snapshot is a later blob. */
async function onlyBlobs(bucket: Bucket): Promise<boolean> {
  for (const range of [{ lt: BLOB_KEYS_FROM }, { gte: BLOB_KEYS_TO }]) {
    for await (const entries of bucket.db.entries({ ...range, limit: 1, values: false })) {
      if (entries.length > 0) return false;
    }
  }
  return true;
}

/**
 * Indexes every key of the bucket (or its blobs `from` a blob key on). A bucket holding blobs and records under
 * keys, or a tombstone, was written unindexed and stays so; blobs the index cannot hold are `unpack`ed.
 */
async function scan(buckets: BucketSet, bucket: Bucket, from?: Buffer): Promise<void> {
  let blobs = false;
  let singles = false;
  let tombstone = false;
  let overflow = !bucket.indexed;
  for await (const entries of bucket.db.entries(from === undefined ? {} : { gte: from, lt: BLOB_KEYS_TO })) {
    for (const [key, value] of entries) {
      const blob = blobNumber(key);
      if (blob > 0) {
        blobs = true;
        bucket.lastBlob = Math.max(bucket.lastBlob, blob);
        if (overflow) continue;
        for (const hash of blobHashes(value as Buffer)) {
          if (!buckets.noteKey(hash, bucket, blob)) {
            overflow = true;
            break;
          }
        }
      } else {
        singles = true;
        if (value === undefined || value.length === 0) tombstone = true;
        if (bucket.indexed) buckets.noteKey(hashKey(key.toString('utf8')), bucket, 0);
      }
    }
  }
  if ((blobs && singles) || tombstone) buckets.markUnindexed(bucket);
  if (blobs && overflow) await unpack(buckets, bucket);
}

/**
 * Rewrites every blob of a bucket as records under their own keys, in one atomic write, and forgets its index
 * entries. A record already under its key is newer than any blob copy and stays.
 */
async function unpack(buckets: BucketSet, bucket: Bucket): Promise<void> {
  buckets.markUnindexed(bucket);
  if (bucket.slot !== 0) buckets.index.removeSlot(bucket.slot);
  const latest = new Map<string, Buffer | undefined>();
  const numbers: number[] = [];
  for await (const entries of bucket.db.entries({ gte: BLOB_KEYS_FROM, lt: BLOB_KEYS_TO })) {
    for (const [key, value] of entries) {
      numbers.push(blobNumber(key));
      for (const entry of blobEntries(value as Buffer)) latest.set(entry.key, entry.value);
    }
  }
  const keys = [...latest.keys()];
  const batch = bucket.db.batch();
  for (let i = 0; i < keys.length; i += 1024) {
    const chunk = keys.slice(i, i + 1024);
    const present = await bucket.db.getBuffers(chunk.map((k) => Buffer.from(k, 'utf8')));
    for (let j = 0; j < chunk.length; j++) {
      const value = latest.get(chunk[j] as string);
      // A deleted key needs nothing once the blobs that held it are gone.
      if (present[j] === undefined && value !== undefined) batch.put(chunk[j] as string, value);
    }
  }
  for (const n of numbers) batch.del(blobKey(n));
  batch.write();
}

/**
 * Writes the key index snapshot the next `loadBuckets` starts from (on close, and periodically). Only between
 * operations: the bucket sequences and last blob numbers it records then date the index exactly.
 */
export async function saveIndex(buckets: BucketSet, path: string): Promise<void> {
  const saved = buckets.sorted().map((b) => ({
    name: b.name,
    slot: b.slot,
    identity: b.db.identity,
    sequence: b.db.sequence,
    indexed: b.indexed,
    lastBlob: b.lastBlob,
  }));
  await writeIndexFile(join(path, INDEX_FILE), buckets.index, saved);
}

/** Deletes the key index snapshot (the store was cleared). */
export async function removeIndex(path: string): Promise<void> {
  await rm(join(path, INDEX_FILE), { force: true });
}

/** What a snapshot remembers about each bucket, to tell whether the bucket changed since. */
export interface SnapshotBucket {
  readonly name: string;
  readonly slot: number;
  /** RocksDB's id of the database directory: a recreated bucket has a new one. */
  readonly identity: string;
  /** RocksDB's last sequence number: any later write moves it. */
  readonly sequence: number;
  readonly indexed: boolean;
  readonly lastBlob: number;
}

export const INDEX_FILE = 'index.bin';
// IDX4: each table's (hash, location) pairs interleaved. IDX3 (hashes, then locations) is still read.
const MAGIC = 'IDX4';
const MAGIC_SPLIT = 'IDX3';
// The arrays are written in native byte order; a snapshot from another byte order is simply not used.
const ORDER = endianness();

/** Writes the key index and the bucket list that dates it to `file` (temp file, then rename). */
export async function writeIndexFile(
  file: string,
  index: KeyIndex,
  buckets: readonly SnapshotBucket[],
): Promise<void> {
  const segments = index.snapshot();
  const shape = segments.map(({ entries, live, used }) => ({ capacity: entries.length / 2, live, used }));
  const header = Buffer.from(JSON.stringify({ order: ORDER, segments: shape, buckets }));
  const prefix = Buffer.alloc(8 + header.length + ((4 - (header.length % 4)) % 4));
  prefix.write(MAGIC, 0, 'latin1');
  prefix.writeUInt32LE(header.length, 4);
  header.copy(prefix, 8);
  const tables = segments.map(({ entries }) =>
    Buffer.from(entries.buffer, entries.byteOffset, entries.byteLength),
  );
  // An iterable is written piece by piece: the tables are never copied into one buffer.
  await writeFile(`${file}.tmp`, [prefix, ...tables]);
  await rename(`${file}.tmp`, file);
}

/** Reads a snapshot; undefined when there is none or it is unreadable (the caller then rescans). */
export async function readIndexFile(
  file: string,
): Promise<{ buckets: readonly SnapshotBucket[]; segments: IndexSegmentData[] } | undefined> {
  try {
    const data = await readFile(file);
    const magic = data.toString('latin1', 0, 4);
    if (magic !== MAGIC && magic !== MAGIC_SPLIT) return undefined;
    const headerLength = data.readUInt32LE(4);
    const header = JSON.parse(data.toString('utf8', 8, 8 + headerLength)) as {
      order: string;
      segments: { capacity: number; live: number; used: number }[];
      buckets: SnapshotBucket[];
    };
    if (header.order !== ORDER) return undefined;
    let at = 8 + headerLength + ((4 - (headerLength % 4)) % 4);
    const owned = data.byteOffset === 0 && data.buffer.byteLength === data.length;
    const segments: IndexSegmentData[] = [];
    for (const { capacity, live, used } of header.segments) {
      const start = data.byteOffset + at;
      if (at + capacity * 8 > data.length) return undefined;
      let entries: Uint32Array;
      if (magic === MAGIC) {
        // A buffer of its own (readFile's, for a file of known size) holds the tables in place; a pooled one is copied.
        entries =
          owned && start % 4 === 0
            ? new Uint32Array(data.buffer, start, capacity * 2)
            : new Uint32Array(data.buffer.slice(start, start + capacity * 8));
      } else {
        const hashes = new Uint32Array(data.buffer.slice(start, start + capacity * 4));
        const locations = new Uint32Array(data.buffer.slice(start + capacity * 4, start + capacity * 8));
        entries = new Uint32Array(capacity * 2);
        for (let p = 0; p < capacity; p++) {
          entries[2 * p] = hashes[p] as number;
          entries[2 * p + 1] = locations[p] as number;
        }
      }
      segments.push({ entries, live, used });
      at += capacity * 8;
    }
    if (at !== data.length) return undefined;
    return { buckets: header.buckets, segments };
  } catch {
    return undefined;
  }
}
