/** Location value of a never-used entry; a probe stops here (slot 0 names no bucket, so no entry is 0). */
const EMPTY = 0;
/** Location value of an entry that was removed: probes walk past it, inserts reuse it. */
const TOMBSTONE = 0xffffffff;
const BLOB_BITS = 20;
/** Highest bucket slot an entry can name; slots 1..MAX_SLOT identify live buckets. */
export const MAX_SLOT = 0xffe;
/** Highest blob number an entry can name; a bucket that needs more stores further records under their keys. */
export const MAX_BLOB = 0xfffff;
/** A 32-bit hash and a 32-bit location: bucket slot (12 bits) and blob number (20 bits, 0: under its own key). */
export const BYTES_PER_ENTRY = 8;
/** Tables, picked by the top bits of the hash, each grown on its own: growing one holds 1/16 more, not 3/2. */
const SEGMENTS = 16;
const MIN_SEGMENT = 1 << 8;
/** Rehash once live entries plus tombstones pass this share of a table (linear probing stays short). */
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
 * Smallest table (a power of two) that holds one segment's share of `expectedIds` below the load limit. The
 * top hash bits spread ids binomially over the segments, so the share gets a margin of 5 standard deviations
 * (10M ids: 625,000 ± ~4,000), which no realistic key set exceeds.
 */
function presizedSegment(expectedIds: number): number {
  const share = expectedIds / SEGMENTS;
  const needed = Math.ceil(share + 5 * Math.sqrt(share) + 1);
  let capacity = MIN_SEGMENT;
  while (capacity * MAX_LOAD < needed) capacity *= 2;
  return capacity;
}

function location(slot: number, blob: number): number {
  return (slot * (1 << BLOB_BITS) + blob) >>> 0;
}

/** One open-addressing table of (hash, location) pairs. */
class Segment {
  hashes: Uint32Array;
  locations: Uint32Array;
  mask: number;
  /** Entries naming a place. */
  live = 0;
  /** Live entries plus tombstones. */
  used = 0;

  constructor(capacity: number) {
    this.hashes = new Uint32Array(capacity);
    this.locations = new Uint32Array(capacity);
    this.mask = capacity - 1;
  }

  rehash(capacity: number): void {
    const oldHashes = this.hashes;
    const oldLocations = this.locations;
    const hashes = new Uint32Array(capacity);
    const locations = new Uint32Array(capacity);
    const mask = capacity - 1;
    for (let i = 0; i < oldLocations.length; i++) {
      const at = oldLocations[i] as number;
      if (at === EMPTY || at === TOMBSTONE) continue;
      const hash = oldHashes[i] as number;
      let p = hash & mask;
      while (locations[p] !== EMPTY) p = (p + 1) & mask;
      hashes[p] = hash;
      locations[p] = at;
    }
    this.hashes = hashes;
    this.locations = locations;
    this.mask = mask;
    this.used = this.live;
  }
}

/** What a snapshot holds of the index: each segment's arrays and counters. */
export interface IndexSegmentData {
  readonly hashes: Uint32Array;
  readonly locations: Uint32Array;
  readonly live: number;
  readonly used: number;
}

/**
 * In-memory map from key hash to where the key may be stored: open-addressing tables of (32-bit hash,
 * bucket slot + blob number) entries, 8 bytes each. It answers "definitely absent" for a new id without
 * touching RocksDB, and names the blob (or, for blob 0, the record under its own key) to read for a duplicate.
 *
 * It can err only one way. Two keys with equal hashes can both match a lookup, so it can name a blob that turns
 * out not to hold the key (about n / 2^32 of new ids: a wasted read, and the blob's keys settle it). It never
 * omits a place that holds the key's newest copy: entries are added before the write and removed only when
 * their whole bucket is dropped. When the tables cannot grow within the
 * memory cap, `insert` returns false and the caller stores the key where a lookup reads it without the index.
 */
export class KeyIndex {
  #segments: Segment[];
  /** Largest table of one segment. */
  readonly #maxSegment: number;

  /** Table size every segment starts at (and is brought up to on restore): presized for `expectedIds`. */
  readonly #initialSegment: number;

  /**
   * An index of at most `maxBytes`; below one minimal table per segment it is disabled and stores nothing.
   * `expectedIds` presizes the tables so that holding that many entries never grows (rehashes) one, as far
   * as `maxBytes` allows.
   */
  constructor(maxBytes: number, expectedIds = 0) {
    let max = 0;
    for (let c = MIN_SEGMENT; c * BYTES_PER_ENTRY * SEGMENTS <= maxBytes; c *= 2) max = c;
    this.#maxSegment = max;
    this.#initialSegment = Math.min(max, presizedSegment(expectedIds));
    this.#segments =
      max === 0 ? [] : Array.from({ length: SEGMENTS }, () => new Segment(this.#initialSegment));
  }

  /** False when the memory cap is too small for any table: every lookup must then read RocksDB. */
  get enabled(): boolean {
    return this.#maxSegment > 0;
  }

  /** Entries naming a place. */
  get size(): number {
    let live = 0;
    for (const segment of this.#segments) live += segment.live;
    return live;
  }

  /** Bytes held by the tables. */
  get bytes(): number {
    let bytes = 0;
    for (const segment of this.#segments) bytes += segment.hashes.length * BYTES_PER_ENTRY;
    return bytes;
  }

  /** Records that the key with this hash may be in blob `blob` of bucket `slot`. False when the table is full. */
  insert(hash: number, slot: number, blob: number): boolean {
    if (this.#maxSegment === 0 || slot < 1 || slot > MAX_SLOT || blob > MAX_BLOB) return false;
    const segment = this.#segments[hash >>> 28] as Segment;
    if (segment.used + 1 > segment.hashes.length * MAX_LOAD && !this.#makeRoom(segment)) return false;
    const at = location(slot, blob);
    const { hashes, locations, mask } = segment;
    let p = hash & mask;
    let reuse = -1;
    for (let l = locations[p] as number; l !== EMPTY; l = locations[p] as number) {
      if (l === TOMBSTONE) {
        if (reuse < 0) reuse = p;
      } else if (l === at && hashes[p] === hash) {
        return true;
      }
      p = (p + 1) & mask;
    }
    if (reuse < 0) {
      reuse = p;
      segment.used++;
    }
    hashes[reuse] = hash;
    locations[reuse] = at;
    segment.live++;
    return true;
  }

  /**
   * Writes the (slot, blob) pairs of the places that may hold the key into `slotsOut` and `blobsOut`, returns
   * how many. A hit is usually the only one; the arrays are the caller's scratch space.
   */
  lookup(hash: number, slotsOut: number[], blobsOut: number[]): number {
    if (this.#maxSegment === 0) return 0;
    const { hashes, locations, mask } = this.#segments[hash >>> 28] as Segment;
    let n = 0;
    for (
      let p = hash & mask, l = locations[p] as number;
      l !== EMPTY;
      p = (p + 1) & mask, l = locations[p] as number
    ) {
      if (l !== TOMBSTONE && hashes[p] === hash) {
        slotsOut[n] = l >>> BLOB_BITS;
        blobsOut[n++] = l & MAX_BLOB;
      }
    }
    return n;
  }

  /** Forgets every entry of a dropped bucket, so its slot can be reused. One pass over the tables. */
  removeSlot(slot: number): void {
    for (const segment of this.#segments) {
      const locations = segment.locations;
      let removed = 0;
      for (let p = 0; p < locations.length; p++) {
        const l = locations[p] as number;
        if (l !== EMPTY && l !== TOMBSTONE && l >>> BLOB_BITS === slot) {
          locations[p] = TOMBSTONE;
          removed++;
        }
      }
      segment.live -= removed;
    }
  }

  /** Drops every entry. */
  clear(): void {
    for (const segment of this.#segments) {
      segment.locations.fill(EMPTY);
      segment.live = 0;
      segment.used = 0;
    }
  }

  /** The tables and their counters, for the snapshot written on close. */
  snapshot(): IndexSegmentData[] {
    return this.#segments.map(({ hashes, locations, live, used }) => ({ hashes, locations, live, used }));
  }

  /** Adopts a snapshot; false (and nothing changed) when it does not fit this index's cap. */
  restore(data: readonly IndexSegmentData[]): boolean {
    if (data.length !== SEGMENTS || this.#maxSegment === 0) return false;
    for (const { hashes, locations } of data) {
      const capacity = hashes.length;
      if (capacity > this.#maxSegment || capacity !== locations.length || (capacity & (capacity - 1)) !== 0) {
        return false;
      }
    }
    this.#segments = data.map((d) => {
      const segment = new Segment(0);
      segment.hashes = d.hashes;
      segment.locations = d.locations;
      segment.mask = d.hashes.length - 1;
      segment.live = d.live;
      segment.used = d.used;
      // A snapshot taken before the store was presized: grow it once now rather than step by step later.
      if (segment.hashes.length < this.#initialSegment) segment.rehash(this.#initialSegment);
      return segment;
    });
    return true;
  }

  /** Rehashes a table without tombstones, doubling when more than half of it is live. False at the cap. */
  #makeRoom(segment: Segment): boolean {
    const capacity = segment.hashes.length;
    let next = segment.live + 1 > capacity / 2 ? capacity * 2 : capacity;
    if (next > this.#maxSegment) {
      if (segment.live + 1 > capacity * MAX_LOAD || segment.used === segment.live) return false;
      next = capacity;
    }
    segment.rehash(next);
    return true;
  }
}
