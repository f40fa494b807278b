import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  type ChangelogEntry,
  decodePack,
  encodeMark,
  ensureChangelogTopic,
  readChangelog,
} from '../../src/kafka/changelog/index.js';
import { nodeDefaults } from '../../src/node/options.js';
import { testClient, testPortAdmin, waitForCommitted } from '../helpers/kafka.js';
import { rocksdbRepository, startNodeInProcess } from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedUidCounts, exactlyOnceChangelogTestbed } from './exactly-once-input.js';

describe('exactly-once changelog packs', { skip: skipUnlessEnabled('kafka') }, () => {
  it('restores a changelog written one record per id (before packs), and then its own packs', {
    timeout: 180_000,
  }, async (t) => {
    const { kafka, admin, topic, output, groupId, changelog, producer, config } =
      await exactlyOnceChangelogTestbed(t);
    await ensureChangelogTopic(await testPortAdmin(t), {
      topic: changelog,
      partitions: 1,
      retentionMs: nodeDefaults.ttlMs,
      configKey: 'changelog.topic',
    });
    // What an upgraded node finds: one record per id (format 1 and 3), and a deletion that forgets one.
    const old = Array.from({ length: 10 }, (_, i) => `old-${i}`);
    const expiresAt = Date.now() + 3_600_000;
    await producer.send({
      topic: changelog,
      acks: -1,
      messages: [
        ...old.map((uid, i) => ({
          key: uid,
          value: encodeMark(i % 2 === 0 ? { expiresAt } : { expiresAt, firstSeenAt: Date.now() }),
          partition: 0,
        })),
        { key: 'old-9', value: null, partition: 0 },
      ],
    });
    const oldRecords = old.length + 1;
    const fresh = Array.from({ length: 10 }, (_, i) => `new-${i}`);
    const send = (list: readonly string[]) =>
      producer.send({
        topic,
        acks: -1,
        messages: list.map((uid) => ({ key: uid, value: JSON.stringify({ uid }), partition: 0 })),
      });

    await send([...old, ...fresh]);
    const a = await startNodeInProcess(t, config(await rocksdbRepository(t)));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
    await a.handle.stop();
    assert.equal((await a.handle.metrics.restoredIds.get()).values[0]?.value, old.length - 1);
    const forwarded = ['old-9', ...fresh];
    const counts = await committedUidCounts(kafka, output, forwarded.length);
    assert.deepEqual(
      [...counts.keys()].sort(),
      [...forwarded].sort(),
      'the old marks held; old-9 was deleted',
    );
    assert.deepEqual(
      [...counts.values()].filter((n) => n !== 1),
      [],
    );

    // The node's own writes: packs, fewer records than the ids they hold.
    const written: ChangelogEntry[] = [];
    await readChangelog(await testClient(t), {
      topic: changelog,
      from: new Map([[0, oldRecords]]),
      onBatch: (_, records) => void written.push(...records),
    });
    const packed = written.flatMap((r) => decodePack(r.value as Buffer).map((c) => c.key));
    assert.deepEqual(packed.sort(), [...forwarded].sort());
    assert.ok(written.length < forwarded.length, `${written.length} records for ${forwarded.length} ids`);

    // B: an empty store restores both formats and forwards none of the ids again.
    await send([...old, ...fresh]);
    const b = await startNodeInProcess(t, config({ type: 'memory' }));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
    await b.handle.stop();
    assert.equal((await b.handle.metrics.restoredIds.get()).values[0]?.value, old.length + fresh.length);
    assert.equal(b.handle.totals().recordsOut, 0, 'no id forwarded twice');
  });
});
