import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { endianness, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  BlobBuilder,
  blobEntries,
  blobKey,
  blobNumber,
  findInBlob,
  RecentBlobs,
} from '../../src/repositories/rocksdb/blob.js';
import { bucketDeadline, bucketWidth } from '../../src/repositories/rocksdb/bucket-set.js';
import { BYTES_PER_ENTRY, hashKey, KeyIndex } from '../../src/repositories/rocksdb/key-index.js';
import { INDEX_FILE, readIndexFile, writeIndexFile } from '../../src/repositories/rocksdb/startup.js';

const HOUR = 3_600_000;

describe('rocksdb key index', () => {
  it('finds every inserted key through growth, and forgets a dropped bucket', () => {
    const index = new KeyIndex(64 * 1024 * 1024);
    const keys = Array.from({ length: 200_000 }, (_, i) => `key-${i}`);
    for (const [i, key] of keys.entries()) assert.ok(index.insert(hashKey(key), 1 + (i % 3), i));
    const out: number[] = [];
    const blobs: number[] = [];
    keys.forEach((key, i) => {
      const n = index.lookup(hashKey(key), out, blobs);
      assert.ok(out.slice(0, n).includes(1 + (i % 3)), key);
      assert.ok(blobs.slice(0, n).includes(i), key);
    });
    assert.equal(index.size, 200_000);

    index.removeSlot(2);
    keys.forEach((key, i) => {
      const n = index.lookup(hashKey(key), out, blobs);
      const slots = out.slice(0, n);
      assert.ok(!slots.includes(2), key);
      if (i % 3 !== 1) assert.ok(slots.includes(1 + (i % 3)), key);
    });
    // Tombstones are reused and probe chains survive them.
    for (const key of keys.slice(0, 1000)) assert.ok(index.insert(hashKey(key), 4, 1));
    for (const key of keys.slice(0, 1000))
      assert.ok(out.slice(0, index.lookup(hashKey(key), out, blobs)).includes(4));
  });

  it('refuses inserts past its memory cap instead of growing', () => {
    const index = new KeyIndex(1 << 17); // 128 KiB: 16 tables of 1024 entries at most, each filled to 3/4
    let accepted = 0;
    while (index.insert(hashKey(`k${accepted}`), 1, 1)) accepted++;
    // The first table to fill refuses; the others are nearly as full, as the hashes spread evenly.
    assert.ok(accepted <= 16 * 768 && accepted > 16 * 640, String(accepted));
    assert.equal(index.bytes, 16 * 1024 * BYTES_PER_ENTRY);
    assert.equal(new KeyIndex(0).insert(1, 1, 1), false);
    assert.equal(new KeyIndex(0).enabled, false);
  });

  it('presized for expectedIds, holds them without growing a table, within its memory cap', () => {
    const n = 300_000;
    const index = new KeyIndex(256 * 1024 * 1024, n);
    const presized = index.bytes;
    for (let i = 0; i < n; i++) assert.ok(index.insert(hashKey(`id-${i}`), 1, 1 + (i >>> 5)));
    assert.equal(index.bytes, presized, 'a table grew (rehashed) below expectedIds');
    assert.equal(index.size, n);
    // Growing step by step ends at the same size: presizing costs no memory beyond what the ids need.
    const grown = new KeyIndex(256 * 1024 * 1024);
    for (let i = 0; i < n; i++) grown.insert(hashKey(`id-${i}`), 1, 1 + (i >>> 5));
    assert.equal(presized, grown.bytes);
    // The cap wins over the expectation.
    assert.equal(new KeyIndex(1 << 20, 10_000_000).bytes, 1 << 20);
    assert.equal(new KeyIndex(0, 1000).enabled, false);
    // A snapshot of smaller tables is brought up to the presized size on restore.
    const small = new KeyIndex(1 << 20);
    for (let i = 0; i < 1000; i++) small.insert(hashKey(`r${i}`), 2, 1);
    const restored = new KeyIndex(256 * 1024 * 1024, n);
    assert.ok(restored.restore(small.snapshot()));
    assert.equal(restored.bytes, presized);
    const out: number[] = [];
    for (let i = 0; i < 1000; i++) assert.equal(restored.lookup(hashKey(`r${i}`), out, []), 1);
  });

  it('round-trips through a snapshot', () => {
    const index = new KeyIndex(1 << 20);
    for (let i = 0; i < 5000; i++) index.insert(hashKey(`s${i}`), 7, i + 1);
    const segments = index.snapshot();
    const copy = new KeyIndex(1 << 20);
    assert.ok(copy.restore(segments.map((s) => ({ ...s, entries: s.entries.slice() }))));
    const out: number[] = [];
    const outBlobs: number[] = [];
    for (let i = 0; i < 5000; i++) {
      assert.equal(copy.lookup(hashKey(`s${i}`), out, outBlobs), 1);
      assert.equal(outBlobs[0], i + 1);
    }
    assert.equal(new KeyIndex(1 << 15).restore(segments), false, 'larger than the cap');
  });
});

describe('rocksdb index snapshot file', () => {
  it('reads the previous layout (IDX3: hashes, then locations) into the interleaved tables', async () => {
    const index = new KeyIndex(1 << 20);
    for (let i = 0; i < 3000; i++) index.insert(hashKey(`v${i}`), 3, i + 1);
    const segments = index.snapshot();
    // The IDX3 file of this index, written as the previous version did.
    const header = Buffer.from(
      JSON.stringify({
        order: endianness(),
        segments: segments.map((s) => ({ capacity: s.entries.length / 2, live: s.live, used: s.used })),
        buckets: [],
      }),
    );
    const prefix = Buffer.alloc(8 + header.length + ((4 - (header.length % 4)) % 4));
    prefix.write('IDX3', 0, 'latin1');
    prefix.writeUInt32LE(header.length, 4);
    header.copy(prefix, 8);
    const parts = [prefix];
    for (const { entries } of segments) {
      const capacity = entries.length / 2;
      const hashes = new Uint32Array(capacity);
      const locations = new Uint32Array(capacity);
      for (let p = 0; p < capacity; p++) {
        hashes[p] = entries[2 * p] as number;
        locations[p] = entries[2 * p + 1] as number;
      }
      parts.push(Buffer.from(hashes.buffer), Buffer.from(locations.buffer));
    }
    const dir = await mkdtemp(join(tmpdir(), 'idem-idx3-'));
    try {
      await writeFile(join(dir, INDEX_FILE), Buffer.concat(parts));
      const snapshot = await readIndexFile(join(dir, INDEX_FILE));
      assert.ok(snapshot !== undefined);
      const copy = new KeyIndex(1 << 20);
      assert.ok(copy.restore(snapshot.segments));
      const out: number[] = [];
      const blobs: number[] = [];
      for (let i = 0; i < 3000; i++) {
        assert.equal(copy.lookup(hashKey(`v${i}`), out, blobs), 1);
        assert.equal(blobs[0], i + 1);
      }
      // And the current layout round-trips through the file.
      await writeIndexFile(join(dir, INDEX_FILE), copy, []);
      const again = await readIndexFile(join(dir, INDEX_FILE));
      assert.deepEqual(
        again?.segments.map((s) => Array.from(s.entries)),
        segments.map((s) => Array.from(s.entries)),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('rocksdb blobs', () => {
  it('find exactly the key asked for, its newest entry and its deletion', () => {
    const blob = new BlobBuilder(3);
    blob.add(hashKey('a'), 'a', Buffer.from('c\u00011'));
    blob.add(hashKey('b'), 'b', Buffer.from('c\u00012'));
    // A key sharing another's hash (as in a 32-bit collision) is told apart by its bytes.
    blob.add(hashKey('a'), 'é', Buffer.from('c\u00013'));
    blob.add(hashKey('b'), 'b', undefined);
    const bytes = blob.encode();
    assert.deepEqual(findInBlob(bytes, hashKey('a'), Buffer.from('a')), { value: 'c\u00011' });
    assert.deepEqual(findInBlob(bytes, hashKey('a'), Buffer.from('é')), { value: 'c\u00013' });
    assert.deepEqual(findInBlob(bytes, hashKey('b'), Buffer.from('b')), { deleted: true });
    assert.equal(findInBlob(bytes, hashKey('c'), Buffer.from('c')), undefined);
    assert.equal(findInBlob(bytes, hashKey('a'), Buffer.from('b')), undefined);
    assert.deepEqual(
      blobEntries(bytes).map((e) => [e.key, e.value?.toString()]),
      [
        ['a', 'c\u00011'],
        ['b', 'c\u00012'],
        ['é', 'c\u00013'],
        ['b', undefined],
      ],
    );
    assert.equal(blobNumber(blobKey(0xfffffffe)), 0xfffffffe);
    assert.equal(blobNumber(Buffer.from('\u0000b64:AA==')), 0);
  });

  it('kept in memory: copies of the newest, up to 16 MiB, by bucket slot and blob number', () => {
    const recent = new RecentBlobs();
    const mib = (n: number) => Buffer.alloc(1024 * 1024, n);
    for (let n = 1; n <= 16; n++) recent.add(1, n, mib(n));
    assert.equal(recent.get(1, 1)?.[0], 1);
    assert.equal(recent.get(1, 16)?.[1024 * 1024 - 1], 16);
    // Full: it starts over with the newest, never handing out bytes it has overwritten.
    for (let n = 17; n <= 20; n++) recent.add(1, n, mib(n));
    recent.add(2, 20, mib(99));
    assert.equal(recent.get(1, 16), undefined);
    assert.equal(recent.get(1, 17)?.[0], 17);
    assert.equal(recent.get(1, 20)?.[0], 20);
    assert.equal(recent.get(2, 20)?.[0], 99);
    recent.clear();
    assert.equal(recent.get(1, 20), undefined);
  });
});

describe('rocksdb bucket width', () => {
  it('is about a quarter of the lifetime on a fixed ladder, capped by bucketMs', () => {
    assert.equal(bucketWidth(1_200, HOUR), 10_000);
    assert.equal(bucketWidth(10 * 60_000, HOUR), 60_000);
    assert.equal(bucketWidth(HOUR, HOUR), 600_000);
    assert.equal(bucketWidth(24 * HOUR, HOUR), HOUR);
    assert.equal(bucketWidth(7 * 24 * HOUR, 6 * HOUR), 6 * HOUR);
    assert.equal(bucketWidth(60_000, 1_000), 1_000, 'bucketMs below the ladder');
  });

  it('ends strictly after the time the record may be forgotten', () => {
    assert.equal(bucketDeadline(HOUR, HOUR), 2 * HOUR);
    assert.equal(bucketDeadline(HOUR - 1, HOUR), HOUR);
  });
});
