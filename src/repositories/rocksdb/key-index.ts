/** Slot value of a never-used entry; a probe stops here. */
const EMPTY = 0;
/** Slot value of an entry whose bucket was dropped: probes walk past it, inserts reuse it. */
const TOMBSTONE = 0xffff;
/** Highest bucket slot an entry can name; slots 1..MAX_SLOT identify live buckets. */
export const MAX_SLOT = 0xfffe;
/** A 32-bit hash, a 16-bit bucket slot and a 32-bit blob number (0: the key is stored on its own). */
export const BYTES_PER_ENTRY = 10;
const MIN_CAPACITY = 1 << 12;
/** Rehash once live entries plus tombstones pass this share of the table (linear probing stays short). */
const MAX_LOAD = 0.75;

/**
 * 32-bit hash of a key's UTF-16 code units: FNV-1a, then murmur3's finaliser so the low bits (the table index)
 * are well mixed. Lookups and the rebuild scan both hash the same JS string, so the two always agree.
 */
export function hashKey(key: string): number {
  let h = 0x811c9dc5 ^ key.length;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * In-memory map from key hash to where the key may be stored: an open-addressing table of (32-bit hash, bucket
 * slot, blob number) entries, 10 bytes each. It answers "definitely absent" for a new id without touching
 * RocksDB, and names the blob (or, for blob 0, the single-record key) to read for a duplicate.
 *
 * It can err only one way. Two keys with equal hashes can both match a lookup, so it can name a blob that turns
 * out not to hold the key (about n / 2^32 of new ids: a wasted read, and the blob's keys settle it). It never
 * omits a place that holds the key's newest copy: entries are added before the write, and removed only once a
 * newer copy is written (`remove`) or their whole bucket is dropped. When the table cannot grow within its
 * memory cap, `insert` returns false and the caller stores the key where a lookup reads it without the index.
 */
export class KeyIndex {
  #hashes: Uint32Array;
  #slots: Uint16Array;
  #blobs: Uint32Array;
  #mask: number;
  /** Entries naming a live bucket. */
  #live = 0;
  /** Live entries plus tombstones. */
  #used = 0;
  readonly #maxCapacity: number;

  /** An index of at most `maxBytes`; below one minimal table it is disabled and stores nothing. */
  constructor(maxBytes: number) {
    let max = 0;
    for (let c = MIN_CAPACITY; c * BYTES_PER_ENTRY <= maxBytes; c *= 2) max = c;
    this.#maxCapacity = max;
    const capacity = max === 0 ? 0 : MIN_CAPACITY;
    this.#hashes = new Uint32Array(capacity);
    this.#slots = new Uint16Array(capacity);
    this.#blobs = new Uint32Array(capacity);
    this.#mask = capacity - 1;
  }

  /** False when the memory cap is too small for any table: every lookup must then read RocksDB. */
  get enabled(): boolean {
    return this.#maxCapacity > 0;
  }

  /** Entries naming a live bucket. */
  get size(): number {
    return this.#live;
  }

  /** Bytes held by the table. */
  get bytes(): number {
    return this.#hashes.length * BYTES_PER_ENTRY;
  }

  /** Records that the key with this hash may be in blob `blob` of bucket `slot`. False when the table is full. */
  insert(hash: number, slot: number, blob: number): boolean {
    if (this.#maxCapacity === 0) return false;
    if (this.#used + 1 > this.#hashes.length * MAX_LOAD && !this.#makeRoom()) return false;
    const hashes = this.#hashes;
    const slots = this.#slots;
    const blobs = this.#blobs;
    const mask = this.#mask;
    let p = hash & mask;
    let reuse = -1;
    for (let s = slots[p] as number; s !== EMPTY; s = slots[p] as number) {
      if (s === TOMBSTONE) {
        if (reuse < 0) reuse = p;
      } else if (s === slot && hashes[p] === hash && blobs[p] === blob) {
        return true;
      }
      p = (p + 1) & mask;
    }
    if (reuse < 0) {
      reuse = p;
      this.#used++;
    }
    hashes[reuse] = hash;
    slots[reuse] = slot;
    blobs[reuse] = blob;
    this.#live++;
    return true;
  }

  /** Forgets one entry (a newer copy of its key was written elsewhere); false when there is none. */
  remove(hash: number, slot: number, blob: number): boolean {
    const hashes = this.#hashes;
    const slots = this.#slots;
    const blobs = this.#blobs;
    const mask = this.#mask;
    if (mask < 0) return false;
    for (
      let p = hash & mask, s = slots[p] as number;
      s !== EMPTY;
      p = (p + 1) & mask, s = slots[p] as number
    ) {
      if (s === slot && hashes[p] === hash && blobs[p] === blob) {
        slots[p] = TOMBSTONE;
        this.#live--;
        return true;
      }
    }
    return false;
  }

  /**
   * Writes the (slot, blob) pairs of the places that may hold the key into `slotsOut` and `blobsOut`, returns
   * how many. A hit is usually the only one; the arrays are the caller's scratch space.
   */
  lookup(hash: number, slotsOut: number[], blobsOut: number[]): number {
    const hashes = this.#hashes;
    const slots = this.#slots;
    const mask = this.#mask;
    let n = 0;
    if (mask < 0) return 0;
    for (
      let p = hash & mask, s = slots[p] as number;
      s !== EMPTY;
      p = (p + 1) & mask, s = slots[p] as number
    ) {
      if (s !== TOMBSTONE && hashes[p] === hash) {
        slotsOut[n] = s;
        blobsOut[n++] = this.#blobs[p] as number;
      }
    }
    return n;
  }

  /** Forgets every entry of a dropped bucket, so its slot can be reused. One pass over the table. */
  removeSlot(slot: number): void {
    const slots = this.#slots;
    let removed = 0;
    for (let p = 0; p < slots.length; p++) {
      if (slots[p] === slot) {
        slots[p] = TOMBSTONE;
        removed++;
      }
    }
    this.#live -= removed;
  }

  /** Drops every entry. */
  clear(): void {
    this.#slots.fill(EMPTY);
    this.#live = 0;
    this.#used = 0;
  }

  /** The table's arrays and counters, for the snapshot written on close. */
  snapshot(): { hashes: Uint32Array; slots: Uint16Array; blobs: Uint32Array; live: number; used: number } {
    return {
      hashes: this.#hashes,
      slots: this.#slots,
      blobs: this.#blobs,
      live: this.#live,
      used: this.#used,
    };
  }

  /** Adopts a snapshot; false (and nothing changed) when it does not fit this index's cap. */
  restore(hashes: Uint32Array, slots: Uint16Array, blobs: Uint32Array, live: number, used: number): boolean {
    const capacity = hashes.length;
    if (
      capacity > this.#maxCapacity ||
      capacity !== slots.length ||
      capacity !== blobs.length ||
      (capacity & (capacity - 1)) !== 0
    ) {
      return false;
    }
    this.#hashes = hashes;
    this.#slots = slots;
    this.#blobs = blobs;
    this.#mask = capacity - 1;
    this.#live = live;
    this.#used = used;
    return true;
  }

  /** Rehashes without tombstones, doubling when more than half the table is live. False at the cap. */
  #makeRoom(): boolean {
    const capacity = this.#hashes.length;
    let next = this.#live + 1 > capacity / 2 ? capacity * 2 : capacity;
    if (next > this.#maxCapacity) {
      if (this.#live + 1 > capacity * MAX_LOAD || this.#used === this.#live) return false;
      next = capacity;
    }
    this.#rehash(next);
    return true;
  }

  #rehash(capacity: number): void {
    const oldHashes = this.#hashes;
    const oldSlots = this.#slots;
    const oldBlobs = this.#blobs;
    const hashes = new Uint32Array(capacity);
    const slots = new Uint16Array(capacity);
    const blobs = new Uint32Array(capacity);
    const mask = capacity - 1;
    for (let i = 0; i < oldSlots.length; i++) {
      const s = oldSlots[i] as number;
      if (s === EMPTY || s === TOMBSTONE) continue;
      const hash = oldHashes[i] as number;
      let p = hash & mask;
      while (slots[p] !== EMPTY) p = (p + 1) & mask;
      hashes[p] = hash;
      slots[p] = s;
      blobs[p] = oldBlobs[i] as number;
    }
    this.#hashes = hashes;
    this.#slots = slots;
    this.#blobs = blobs;
    this.#mask = mask;
    this.#used = this.#live;
  }
}
