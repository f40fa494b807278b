/** Location value of a never-used entry; a probe stops here (slot 0 names no bucket, so no entry is 0). */
const EMPTY = 0;
/** Location value of an entry that was removed: probes walk past it, inserts reuse it. */
const TOMBSTONE = 0xffffffff;
const BLOB_BITS = 20;
/** Highest bucket slot an entry can name; slots 1..MAX_SLOT identify live buckets. */
export const MAX_SLOT = 0xffe;
/** Highest blob number an entry can name; a bucket that needs more stores further records under their keys. */
const MAX_BLOB = 0xfffff;
/** A 32-bit hash and a 32-bit location: bucket slot (12 bits) and blob number (20 bits, 0: under its own key). */
export const BYTES_PER_ENTRY = 8;
/** Tables, picked by the top bits of the hash, each grown on its own: growing one holds 1/16 more, not 3/2. */
const SEGMENTS = 16;
const MIN_SEGMENT = 1 << 8;
/** Rehash once live entries plus tombstones pass this share of a table (linear probing stays short). */
const MAX_LOAD = 0.75;

/** 32-bit hash of a key's UTF-16 code units: FNV-1a, then murmur3's finaliser to mix the low (index) bits. */
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

/** Smallest power-of-two table holding a segment's share of `expectedIds` below MAX_LOAD, with a 5 σ margin. */
function presizedSegment(expectedIds: number): number {
  const share = expectedIds / SEGMENTS;
  const needed = Math.ceil(share + 5 * Math.sqrt(share) + 1);
  let capacity = MIN_SEGMENT;
  while (capacity * MAX_LOAD < needed) capacity *= 2;
  return capacity;
}

/** An open-addressing table of (hash, location) pairs, interleaved: a probe touches one cache line, not two. */
class Segment {
  /** Capacity minus one (capacity is a power of two). */
  mask: number;

  constructor(
    public entries: Uint32Array,
    /** Entries naming a place. */
    public live = 0,
    /** Live entries plus tombstones. */
    public used = 0,
  ) {
    this.mask = entries.length / 2 - 1;
  }

  get capacity(): number {
    return this.mask + 1;
  }

  rehash(capacity: number): void {
    const old = this.entries;
    const entries = new Uint32Array(capacity * 2);
    const mask = capacity - 1;
    for (let i = 0; i < old.length; i += 2) {
      const at = old[i + 1] as number;
      if (at === EMPTY || at === TOMBSTONE) continue;
      const hash = old[i] as number;
      let p = hash & mask;
      while (entries[2 * p + 1] !== EMPTY) p = (p + 1) & mask;
      entries[2 * p] = hash;
      entries[2 * p + 1] = at;
    }
    this.entries = entries;
    this.mask = mask;
    this.used = this.live;
  }
}

/** What a snapshot holds of the index: each segment's interleaved (hash, location) pairs and counters. */
export interface IndexSegmentData {
  readonly entries: Uint32Array;
  readonly live: number;
  readonly used: number;
}

/**
 * In-memory map from key hash to where the key may be stored (bucket slot + blob number): "absent" for a new id
 * without a read, the blob to read for a duplicate. An equal hash may name a blob without the key (a wasted read);
 * it never omits a key's newest copy (added before the write, removed with the bucket). See docs/rocksdb.md.
 */
export class KeyIndex {
  #segments: Segment[];
  readonly #maxSegment: number;

  /** Table size every segment starts at (and is brought up to on restore). */
  readonly #initialSegment: number;

  /** At most `maxBytes` (none below one minimal table per segment); holding `expectedIds` never rehashes. */
  constructor(maxBytes: number, expectedIds = 0) {
    let max = 0;
    for (let c = MIN_SEGMENT; c * BYTES_PER_ENTRY * SEGMENTS <= maxBytes; c *= 2) max = c;
    this.#maxSegment = max;
    this.#initialSegment = Math.min(max, presizedSegment(expectedIds));
    this.#segments =
      max === 0
        ? []
        : Array.from({ length: SEGMENTS }, () => new Segment(new Uint32Array(this.#initialSegment * 2)));
  }

  /** False when the memory cap is too small for any table: every lookup must then read RocksDB. */
  get enabled(): boolean {
    return this.#maxSegment > 0;
  }

  get size(): number {
    return this.#segments.reduce((sum, segment) => sum + segment.live, 0);
  }

  get bytes(): number {
    return this.#segments.reduce((sum, segment) => sum + segment.capacity * BYTES_PER_ENTRY, 0);
  }

  /** Records that the key with this hash may be in blob `blob` of bucket `slot`. False when the table is full. */
  insert(hash: number, slot: number, blob: number): boolean {
    if (this.#maxSegment === 0 || slot < 1 || slot > MAX_SLOT || blob > MAX_BLOB) return false;
    const segment = this.#segments[hash >>> 28] as Segment;
    if (segment.used + 1 > segment.capacity * MAX_LOAD && !this.#makeRoom(segment)) return false;
    const at = (slot * (1 << BLOB_BITS) + blob) >>> 0;
    const { entries, mask } = segment;
    let p = hash & mask;
    let reuse = -1;
    for (let l = entries[2 * p + 1] as number; l !== EMPTY; l = entries[2 * p + 1] as number) {
      if (l === TOMBSTONE) {
        if (reuse < 0) reuse = p;
      } else if (l === at && entries[2 * p] === hash) {
        return true;
      }
      p = (p + 1) & mask;
    }
    if (reuse < 0) {
      reuse = p;
      segment.used++;
    }
    entries[2 * reuse] = hash;
    entries[2 * reuse + 1] = at;
    segment.live++;
    return true;
  }

  /** Writes the (slot, blob) places that may hold the key into the caller's scratch arrays; returns how many. */
  lookup(hash: number, slotsOut: number[], blobsOut: number[]): number {
    if (this.#maxSegment === 0) return 0;
    const { entries, mask } = this.#segments[hash >>> 28] as Segment;
    let n = 0;
    for (
      let p = hash & mask, l = entries[2 * p + 1] as number;
      l !== EMPTY;
      p = (p + 1) & mask, l = entries[2 * p + 1] as number
    ) {
      if (l !== TOMBSTONE && entries[2 * p] === hash) {
        slotsOut[n] = l >>> BLOB_BITS;
        blobsOut[n++] = l & MAX_BLOB;
      }
    }
    return n;
  }

  /** Forgets every entry of a dropped bucket, so its slot can be reused. One pass over the tables. */
  removeSlot(slot: number): void {
    for (const segment of this.#segments) {
      const entries = segment.entries;
      let removed = 0;
      for (let p = 1; p < entries.length; p += 2) {
        const l = entries[p] as number;
        if (l !== EMPTY && l !== TOMBSTONE && l >>> BLOB_BITS === slot) {
          entries[p] = TOMBSTONE;
          removed++;
        }
      }
      segment.live -= removed;
    }
  }

  clear(): void {
    for (const segment of this.#segments) {
      segment.entries.fill(EMPTY);
      segment.live = 0;
      segment.used = 0;
    }
  }

  snapshot(): IndexSegmentData[] {
    return this.#segments.map(({ entries, live, used }) => ({ entries, live, used }));
  }

  /** Adopts a snapshot; false (and nothing changed) when it does not fit this index's cap. */
  restore(data: readonly IndexSegmentData[]): boolean {
    if (data.length !== SEGMENTS || this.#maxSegment === 0) return false;
    for (const { entries } of data) {
      const capacity = entries.length / 2;
      const fits = Number.isInteger(capacity) && capacity >= 1 && capacity <= this.#maxSegment;
      if (!fits || (capacity & (capacity - 1)) !== 0) return false;
    }
    this.#segments = data.map((d) => {
      const segment = new Segment(d.entries, d.live, d.used);
      // A snapshot taken before the store was presized: grow it once now rather than step by step later.
      if (segment.capacity < this.#initialSegment) segment.rehash(this.#initialSegment);
      return segment;
    });
    return true;
  }

  /** Rehashes a table without tombstones, doubling when more than half of it is live. False at the cap. */
  #makeRoom(segment: Segment): boolean {
    const capacity = segment.capacity;
    let next = segment.live + 1 > capacity / 2 ? capacity * 2 : capacity;
    if (next > this.#maxSegment) {
      if (segment.live + 1 > capacity * MAX_LOAD || segment.used === segment.live) return false;
      next = capacity;
    }
    segment.rehash(next);
    return true;
  }
}
