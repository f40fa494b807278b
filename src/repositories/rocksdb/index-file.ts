import { open, readFile, rename } from 'node:fs/promises';
import { endianness } from 'node:os';
import type { IndexSegmentData, KeyIndex } from './key-index.js';

/** What a snapshot remembers about each bucket, to tell whether the bucket changed since. */
export interface SnapshotBucket {
  readonly name: string;
  readonly slot: number;
  /** RocksDB's id of the database directory: a recreated bucket has a new one. */
  readonly identity: string;
  /** RocksDB's last sequence number: any later write moves it. */
  readonly sequence: number;
  readonly indexed: boolean;
  /** The highest blob number written to the bucket. */
  readonly lastBlob: number;
}

/** A snapshot read back from disk. */
export interface IndexSnapshot {
  readonly buckets: readonly SnapshotBucket[];
  readonly segments: IndexSegmentData[];
}

/** Name of the snapshot file in the store directory. */
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
  const temp = `${file}.tmp`;
  const handle = await open(temp, 'w');
  try {
    await handle.write(prefix);
    for (const { entries } of segments) {
      await handle.write(Buffer.from(entries.buffer, entries.byteOffset, entries.byteLength));
    }
  } finally {
    await handle.close();
  }
  await rename(temp, file);
}

/** Reads a snapshot; undefined when there is none or it is unreadable (the caller then rescans). */
export async function readIndexFile(file: string): Promise<IndexSnapshot | undefined> {
  let data: Buffer;
  try {
    data = await readFile(file);
  } catch {
    return undefined;
  }
  try {
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
