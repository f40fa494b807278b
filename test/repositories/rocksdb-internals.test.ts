import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bucketDeadline, bucketWidth } from '../../src/repositories/rocksdb/buckets.js';
import { BYTES_PER_ENTRY, hashKey, KeyIndex } from '../../src/repositories/rocksdb/key-index.js';

const HOUR = 3_600_000;

describe('rocksdb key index', () => {
  it('finds every inserted key through growth, and forgets a dropped bucket', () => {
    const index = new KeyIndex(64 * 1024 * 1024);
    const keys = Array.from({ length: 200_000 }, (_, i) => `key-${i}`);
    for (const [i, key] of keys.entries()) assert.ok(index.insert(hashKey(key), 1 + (i % 3)));
    const out: number[] = [];
    keys.forEach((key, i) => {
      const n = index.lookup(hashKey(key), out);
      assert.ok(out.slice(0, n).includes(1 + (i % 3)), key);
    });
    assert.equal(index.size, 200_000);

    index.removeSlot(2);
    keys.forEach((key, i) => {
      const n = index.lookup(hashKey(key), out);
      const slots = out.slice(0, n);
      assert.ok(!slots.includes(2), key);
      if (i % 3 !== 1) assert.ok(slots.includes(1 + (i % 3)), key);
    });
    // Tombstones are reused and probe chains survive them.
    for (const key of keys.slice(0, 1000)) assert.ok(index.insert(hashKey(key), 4));
    for (const key of keys.slice(0, 1000))
      assert.ok(out.slice(0, index.lookup(hashKey(key), out)).includes(4));
  });

  it('refuses inserts past its memory cap instead of growing', () => {
    const index = new KeyIndex(1 << 16); // 64 KiB: an 8192-entry table at most, filled to 3/4
    let accepted = 0;
    while (index.insert(hashKey(`k${accepted}`), 1)) accepted++;
    assert.equal(accepted, 6144);
    assert.equal(index.bytes, 8192 * BYTES_PER_ENTRY);
    assert.equal(new KeyIndex(0).insert(1, 1), false);
    assert.equal(new KeyIndex(0).enabled, false);
  });

  it('round-trips through a snapshot', () => {
    const index = new KeyIndex(1 << 20);
    for (let i = 0; i < 5000; i++) index.insert(hashKey(`s${i}`), 7);
    const { hashes, slots, live, used } = index.snapshot();
    const copy = new KeyIndex(1 << 20);
    assert.ok(copy.restore(hashes.slice(), slots.slice(), live, used));
    const out: number[] = [];
    for (let i = 0; i < 5000; i++) assert.equal(copy.lookup(hashKey(`s${i}`), out), 1);
    assert.equal(new KeyIndex(1 << 12).restore(hashes, slots, live, used), false, 'larger than the cap');
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
