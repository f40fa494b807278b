/**
 * Blobs: many records under one RocksDB key, so a batch of new ids costs a few puts rather than one per id (a
 * put is a native call and a memtable insert). The key index names the blob that may hold a key; the blob holds
 * the key's bytes, so every answer is exact. Layout (little-endian):
 *   u32 count, then count × u32 key hash, then count × u32 entry offset, then the entries;
 *   an entry is u16 key bytes, u32 value bytes + 1 (0: a tombstone, the key deleted in this bucket),
 *   the key (UTF-8), the value (an encoded record, `encodeRecord`).
 */

/** Most entries per blob: a duplicate's exact check reads one whole blob, so blobs stay a few KiB. */
const BLOB_ENTRIES = 32;
const BLOB_KEY_BYTES = 6;
/** Bounds of every blob key: no canonical id starts with 00 01 (`toKey`: `\0` is followed by `\0` or `b`). */
export const BLOB_KEYS_FROM = Buffer.from([0x00, 0x01]);
export const BLOB_KEYS_TO = Buffer.from([0x00, 0x02]);

/** The RocksDB key of blob `n` (n ≥ 1) of a bucket: big-endian, so blobs sort in write order. */
export function blobKey(n: number): Buffer {
  const key = Buffer.allocUnsafe(BLOB_KEY_BYTES);
  key[0] = 0x00;
  key[1] = 0x01;
  key.writeUInt32BE(n, 2);
  return key;
}

/** The blob number of a RocksDB key, or 0 when the key is a single record's (an id). */
export function blobNumber(key: Buffer): number {
  if (key.length !== BLOB_KEY_BYTES || key[0] !== 0x00 || key[1] !== 0x01) return 0;
  return key.readUInt32BE(2);
}

/** Collects up to BLOB_ENTRIES entries and encodes them into one buffer. */
export class BlobBuilder {
  readonly hashes: number[] = [];
  readonly keys: string[] = [];
  readonly values: (Uint8Array | undefined)[] = [];
  #bytes = 0;

  constructor(readonly number: number) {}

  get count(): number {
    return this.hashes.length;
  }

  get full(): boolean {
    return this.hashes.length >= BLOB_ENTRIES;
  }

  /** Adds an entry; `value` undefined records the key's deletion from the bucket. */
  add(hash: number, key: string, value: Uint8Array | undefined): void {
    this.hashes.push(hash);
    this.keys.push(key);
    this.values.push(value);
    // A UTF-16 unit is at most 3 UTF-8 bytes: an upper bound, trimmed once encoded.
    this.#bytes += 6 + key.length * 3 + (value?.length ?? 0);
  }

  encode(): Buffer {
    const count = this.hashes.length;
    const head = 4 + count * 8;
    const out = Buffer.allocUnsafe(head + this.#bytes);
    out.writeUInt32LE(count, 0);
    let at = head;
    for (let i = 0; i < count; i++) {
      out.writeUInt32LE(this.hashes[i] as number, 4 + i * 4);
      out.writeUInt32LE(at, 4 + count * 4 + i * 4);
      const keyBytes = writeKey(out, this.keys[i] as string, at + 6);
      const value = this.values[i];
      out.writeUInt16LE(keyBytes, at);
      out.writeUInt32LE(value === undefined ? 0 : value.length + 1, at + 2);
      at += 6 + keyBytes;
      if (value !== undefined) {
        out.set(value, at);
        at += value.length;
      }
    }
    return out.subarray(0, at);
  }
}

/** Bytes of the blobs {@link RecentBlobs} keeps: some 300k ids' records, a duplicate's read for the recent ones. */
const RECENT_BLOB_BYTES = 16 * 1024 * 1024;

/**
 * The blobs written last, copied into one buffer allocated once (kept encoder buffers would pin the allocator's
 * memory between the producer's large requests), by bucket slot and blob number (the key index's location): a
 * duplicate of a recent id is checked without a RocksDB read (a memtable lookup and two copies, ~5 µs). A blob is
 * never rewritten, so a copy is exact while its bucket lives. Full, the buffer starts over empty; a bucket's drop
 * empties it too.
 */
export class RecentBlobs {
  readonly #blobs = new Map<number, Buffer>();
  #memory: Buffer | undefined;
  #used = 0;

  get(slot: number, blob: number): Buffer | undefined {
    return this.#blobs.size > 0 ? this.#blobs.get(slot * 2 ** 32 + blob) : undefined;
  }

  add(slot: number, blob: number, bytes: Buffer): void {
    if (this.#used + bytes.length > RECENT_BLOB_BYTES) this.clear();
    if (bytes.length > RECENT_BLOB_BYTES) return;
    this.#memory ??= Buffer.allocUnsafeSlow(RECENT_BLOB_BYTES);
    const copy = this.#memory.subarray(this.#used, this.#used + bytes.length);
    copy.set(bytes);
    this.#used += bytes.length;
    this.#blobs.set(slot * 2 ** 32 + blob, copy);
  }

  clear(): void {
    this.#blobs.clear();
    this.#used = 0;
  }
}

/** Writes the key's UTF-8 bytes at `at`, returns how many: ASCII char by char (cheaper than `Buffer.write`). */
function writeKey(out: Buffer, key: string, at: number): number {
  const length = key.length;
  for (let j = 0; j < length; j++) {
    const c = key.charCodeAt(j);
    if (c >= 0x80) return out.write(key, at, 'utf8');
    out[at + j] = c;
  }
  return length;
}

/** What a blob says about one key: its encoded record, or that it was deleted (tombstone). */
export type BlobEntry = { readonly value: string } | { readonly deleted: true };

/** The last entry of `blob` for the key (UTF-8 bytes `key`, hash `hash`); undefined for an index collision. */
export function findInBlob(blob: Buffer, hash: number, key: Buffer): BlobEntry | undefined {
  const count = blob.readUInt32LE(0);
  let found: BlobEntry | undefined;
  for (let i = 0; i < count; i++) {
    if (blob.readUInt32LE(4 + i * 4) !== hash) continue;
    const at = blob.readUInt32LE(4 + count * 4 + i * 4);
    const keyBytes = blob.readUInt16LE(at);
    if (keyBytes !== key.length || blob.compare(key, 0, key.length, at + 6, at + 6 + keyBytes) !== 0)
      continue;
    const valueBytes = blob.readUInt32LE(at + 2);
    const start = at + 6 + keyBytes;
    found =
      valueBytes === 0 ? { deleted: true } : { value: blob.toString('utf8', start, start + valueBytes - 1) };
  }
  return found;
}

/** Every entry of a blob, in order: its key, and its encoded record (undefined: a tombstone). */
export function blobEntries(blob: Buffer): { key: string; value: Buffer | undefined }[] {
  const count = blob.readUInt32LE(0);
  const entries: { key: string; value: Buffer | undefined }[] = [];
  for (let i = 0; i < count; i++) {
    const at = blob.readUInt32LE(4 + count * 4 + i * 4);
    const keyBytes = blob.readUInt16LE(at);
    const valueBytes = blob.readUInt32LE(at + 2);
    const start = at + 6 + keyBytes;
    const value = valueBytes === 0 ? undefined : blob.subarray(start, start + valueBytes - 1);
    entries.push({ key: blob.toString('utf8', at + 6, start), value });
  }
  return entries;
}

/** The key hashes of a blob, without decoding its keys (the restart scan needs only these). */
export function blobHashes(blob: Buffer): Uint32Array {
  const count = blob.readUInt32LE(0);
  const hashes = new Uint32Array(count);
  for (let i = 0; i < count; i++) hashes[i] = blob.readUInt32LE(4 + i * 4);
  return hashes;
}
