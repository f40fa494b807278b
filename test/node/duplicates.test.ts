import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { DuplicateAuditValue } from '../../src/node/duplicates.js';
import { randomName, testProducer, waitForCommitted } from '../helpers/kafka.js';
import { nodeConfig, nodeTestbed, rocksdbRepository, startNodeInProcess } from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { produceIds, type readCommitted, readCommittedAtLeast } from './exactly-once-input.js';

/** The audit topic's records, as a read_committed reader sees them, by partition then offset. */
async function auditRecords(kafka: Parameters<typeof readCommitted>[0], topic: string, atLeast: number) {
  return (await readCommittedAtLeast(kafka, topic, atLeast)).map(({ partition, record }) => ({
    partition,
    key: record.key?.toString(),
    value: JSON.parse(record.value?.toString() ?? 'null') as DuplicateAuditValue,
  }));
}

describe('dedup node, output.duplicatesTopic (issue 20 §5)', { skip: skipUnlessEnabled('kafka') }, () => {
  for (const guarantee of ['at-least-once', 'exactly-once'] as const) {
    it(`${guarantee}: one record per dropped duplicate, with its input place and first-seen time`, {
      timeout: 120_000,
    }, async (t) => {
      const partitions = 2;
      const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t, { partitions });
      const audit = randomName('idem-node-dups');
      t.after(() =>
        admin.deleteTopics({ topics: [audit, `${groupId}-${output}-changelog`] }).catch(() => undefined),
      );
      const producer = await testProducer(t, kafka);
      const config = nodeConfig({
        topic,
        groupId,
        output,
        dlq,
        repository: await rocksdbRepository(t),
        extra: { output: { guarantee, duplicatesTopic: audit } },
      });

      // First run: u-0 … u-5, no duplicate (partition 0: u-0 u-2 u-4, partition 1: u-1 u-3 u-5).
      await produceIds(producer, topic, { start: 0, count: 6, partitions, tag: 'first' });
      const first = await startNodeInProcess(t, config);
      await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
      await first.handle.stop();
      assert.equal(first.handle.totals().duplicates, 0);
      const created = await admin.fetchTopicMetadata({ topics: [audit] });
      assert.equal(
        created.topics[0]?.partitions.length,
        partitions,
        'created with the input partition count',
      );

      // Second run: copies of u-0 and u-1 (offset 3 of each partition, marked by the first run), and u-6 twice
      // in partition 0 (offsets 4 and 5).
      await produceIds(producer, topic, { start: 0, count: 2, partitions, tag: 'second' });
      const twice = [0, 1].map(() => ({ key: 'u-6', value: JSON.stringify({ uid: 'u-6' }), partition: 0 }));
      await producer.send({ topic, acks: -1, messages: twice });
      const second = await startNodeInProcess(t, config);
      await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
      await second.handle.stop();
      assert.equal(second.handle.totals().duplicates, 3);

      const records = await auditRecords(kafka, audit, 3);
      assert.equal(records.length, 3, 'one audit record per duplicate, none repeated');
      // Written in the chunk's transaction under exactly-once: its commit marker takes an offset of its own.
      let end = 0;
      for (const { high } of await admin.fetchTopicOffsets(audit)) end += Number(high);
      if (guarantee === 'exactly-once')
        assert.ok(end > records.length, `commit markers in the audit topic (end ${end})`);
      else assert.equal(end, records.length, 'plain writes: one offset per record');
      const byId = new Map(records.map((r) => [r.value.id, r]));
      for (const [id, partition] of [
        ['u-0', 0],
        ['u-1', 1],
      ] as const) {
        const r = byId.get(id);
        assert.ok(r, `${id} audited`);
        assert.equal(r.key, id);
        assert.equal(r.partition, partition, 'in its input partition number');
        assert.deepEqual(
          { ...r.value, firstSeen: undefined },
          { id, topic, partition, offset: '3', reason: 'stored', firstSeen: undefined },
        );
        // Marked by the first run: the store's record tells when (its retention end minus dedup.window).
        assert.equal(new Date(r.value.firstSeen as string).toISOString(), r.value.firstSeen);
      }
      const u6 = byId.get('u-6')?.value;
      assert.ok(u6, 'u-6 audited');
      assert.equal(u6.offset, '5', 'the second copy is the one dropped');
      if (u6.reason === 'batch') {
        // Both copies in one chunk: the first copy is named by its offset; the store has no record of it yet.
        assert.equal(u6.firstOffset, '4');
        assert.equal(u6.firstSeen, null);
      } else {
        assert.equal(u6.reason, 'stored', 'the copies fell in two chunks');
        assert.notEqual(u6.firstSeen, null);
      }
    });
  }

  it('refuses a duplicates topic that is also the output topic, naming the key', async (t) => {
    const { topic, output, dlq, groupId } = await nodeTestbed(t, { partitions: 1 });
    const config = nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      repository: { type: 'memory' },
      extra: { output: { duplicatesTopic: output } },
    });
    await assert.rejects(startNodeInProcess(t, config), /output\.duplicatesTopic/);
  });
});
