import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ChangelogEntry } from '../../src/kafka/changelog/index.js';
import {
  decodeChanges,
  decodeMarkExpiry,
  encodeMark,
  encodePack,
  type PackedChange,
  packEntryBytes,
} from '../../src/kafka/changelog/index.js';
import { waitForCommitted } from '../helpers/kafka.js';
import { rocksdbRepository, startNodeInProcess } from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedUidCounts, exactlyOnceChangelogTestbed } from './exactly-once-input.js';

/** Values no reader can restore: empty, an unknown format byte, and expiries that are not times. */
function badValues(): { label: string; value: Buffer }[] {
  const nan = encodeMark({ expiresAt: Date.now() + 60_000 });
  nan.writeDoubleBE(Number.NaN, 1);
  const infinite = encodeMark({ expiresAt: Date.now() + 60_000 });
  infinite.writeDoubleBE(Number.POSITIVE_INFINITY, 1);
  const unknown = Buffer.alloc(9);
  unknown[0] = 9;
  return [
    { label: 'empty value', value: Buffer.alloc(0) },
    { label: 'unknown version byte', value: unknown },
    { label: 'NaN expiry', value: nan },
    { label: 'infinite expiry', value: infinite },
  ];
}

describe('unreadable changelog records (one rule for every reader)', () => {
  it('are skipped and reported with topic, partition and offset; the records around them are restored', () => {
    const good = encodeMark({ expiresAt: Date.now() + 60_000 });
    const records: ChangelogEntry[] = [
      { key: 'a', value: good, offset: 0, headers: {} },
      ...badValues().map(({ value }, i) => ({ key: `bad-${i}`, value, offset: i + 1, headers: {} })),
      { key: 'b', value: null, offset: 9, headers: {} },
      { key: 'c', value: good, offset: 10, headers: {} },
    ];
    const reported: { offset: number; reason: string }[] = [];
    const changes = decodeChanges('log', 2, records, (bad) => {
      assert.equal(bad.topic, 'log');
      assert.equal(bad.partition, 2);
      reported.push(bad);
    });
    assert.deepEqual(
      reported.map((r) => r.offset),
      [1, 2, 3, 4],
    );
    assert.deepEqual(
      changes.map((c) => [c.key, c.record?.state]),
      [
        ['a', 'confirmed'],
        ['b', undefined],
        ['c', 'confirmed'],
      ],
    );
    for (const { label, value } of badValues()) {
      assert.throws(() => decodeMarkExpiry(value), /changelog value/, label);
    }
  });
});

/** A pack of `changes` as the node writes one. */
function pack(changes: PackedChange[]): Buffer {
  const bytes = changes.reduce((n, c) => n + packEntryBytes(Buffer.byteLength(c.key), c.value), 0);
  return encodePack(changes, bytes);
}

describe('unreadable changelog packs', () => {
  it('skip a bad change alone, and a pack whose lengths do not fit whole, each reported at its offset', () => {
    const good = encodeMark({ expiresAt: Date.now() + 60_000 });
    const [nan] = badValues().filter((v) => v.label === 'NaN expiry');
    const held = pack([
      { key: 'a', value: good },
      { key: 'b', value: (nan as { value: Buffer }).value },
      { key: 'a', value: null },
      { key: 'c', value: good },
    ]);
    const cut = held.subarray(0, held.length - 3);
    const extra = Buffer.concat([held, Buffer.from([0])]);
    const huge = Buffer.from(held);
    huge.writeUInt32BE(0xffff_ffff, 1);
    const records: ChangelogEntry[] = [
      { key: '\u0000pack:1', value: held, offset: 5, headers: {} },
      ...[cut, extra, huge].map((value, i) => ({
        key: `\u0000pack:${i}`,
        value,
        offset: 6 + i,
        headers: {},
      })),
      { key: 'd', value: good, offset: 9, headers: {} },
    ];
    const reported: number[] = [];
    const changes = decodeChanges('log', 0, records, (bad) => void reported.push(bad.offset));
    assert.deepEqual(reported, [5, 6, 7, 8]);
    assert.deepEqual(
      changes.map((c) => [c.key, c.record?.state]),
      [
        ['a', 'confirmed'],
        ['a', undefined],
        ['c', 'confirmed'],
        ['d', 'confirmed'],
      ],
    );
  });
});

describe('dedup node restore over unreadable changelog records', { skip: skipUnlessEnabled('kafka') }, () => {
  it('skips them with a counted warning and restores every other mark (exactly-once)', {
    timeout: 180_000,
  }, async (t) => {
    const { kafka, admin, topic, output, groupId, changelog, producer, config } =
      await exactlyOnceChangelogTestbed(t);
    const ids = Array.from({ length: 20 }, (_, i) => `u-${i}`);
    const send = (tag: string, list: readonly string[]) =>
      producer.send({
        topic,
        acks: -1,
        messages: list.map((uid) => ({ key: uid, value: JSON.stringify({ uid, tag }), partition: 0 })),
      });

    await send('first', ids.slice(0, 10));
    const a = await startNodeInProcess(t, config(await rocksdbRepository(t)));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
    await a.handle.stop();
    // Damaged records in the middle of the partition, then more good marks after them.
    await producer.send({
      topic: changelog,
      acks: -1,
      messages: badValues().map(({ value }, i) => ({ key: `damaged-${i}`, value, partition: 0 })),
    });
    await send('first', ids.slice(10));
    const a2 = await startNodeInProcess(t, config(await rocksdbRepository(t)));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
    await a2.handle.stop();
    const skippedByA2 = (await a2.handle.metrics.changelogUnreadable.get()).values[0]?.value ?? 0;
    assert.equal(skippedByA2, 4, 'the restore skipped the four damaged records and went on');

    // B: an empty store; every id again.
    await send('again', ids);
    const b = await startNodeInProcess(t, config({ type: 'memory' }));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
    await b.handle.stop();
    assert.equal(
      (await b.handle.metrics.restoredIds.get()).values[0]?.value,
      ids.length,
      'every good mark restored',
    );
    assert.equal((await b.handle.metrics.changelogUnreadable.get()).values[0]?.value, 4);
    const warnings = b.logs.filter((l) => /unreadable changelog record/.test(l.msg));
    assert.equal(warnings.length, 4);
    assert.deepEqual(
      warnings.map((w) => [w.topic, w.partition, typeof w.offset]),
      warnings.map(() => [changelog, 0, 'number']),
      'each warning names the topic, partition and offset',
    );
    assert.equal(b.handle.totals().recordsOut, 0, 'no id forwarded twice');
    const counts = await committedUidCounts(kafka, output, ids.length);
    assert.equal(counts.size, ids.length);
    assert.deepEqual(
      [...counts.values()].filter((n) => n !== 1),
      [],
    );
  });
});
