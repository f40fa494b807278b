import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { Producer } from 'kafkajs';
import { testProducer, waitForCommitted } from '../helpers/kafka.js';
import { nodeConfig, nodeTestbed, rocksdbRepository, startNodeInProcess } from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { changelogMarks, committedUidCounts } from './exactly-once-input.js';

/*
 * Issue 17: the node as a processor over a logged store. Each scenario forwards ids with node A (RocksDB store),
 * then hands the partition to node B with an empty store (same group): only the changelog can tell B what A
 * forwarded. Before the logged store, a chunk with one distinct id was marked through the store's single-key
 * path, which the exactly-once staging proxy did not see: its mark never reached the changelog, and B forwarded
 * every such id a second time.
 */

type Guarantee = 'exactly-once' | 'at-least-once';

/** Records of ids `u-<i>` (key = id) on partition 0, one request per record with `gapMs` between them. */
async function trickle(
  producer: Producer,
  topic: string,
  ids: readonly string[],
  gapMs: number,
  tag: string,
) {
  for (const uid of ids) {
    await producer.send({
      topic,
      acks: -1,
      messages: [{ key: uid, value: JSON.stringify({ uid, tag }), partition: 0 }],
    });
    if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
  }
}

async function handover(
  t: TestContext,
  guarantee: Guarantee,
  first: (producer: Producer, topic: string) => Promise<readonly string[]>,
) {
  const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t, { partitions: 1 });
  const changelog = `${groupId}-${output}-changelog`;
  t.after(() => admin.deleteTopics({ topics: [changelog] }).catch(() => undefined));
  const producer = await testProducer(t, kafka);
  const extra: Record<string, Record<string, unknown>> = guarantee === 'exactly-once'
    ? { output: { guarantee } }
    : { output: { guarantee }, changelog: { enabled: true } };
  const config = (repository: Record<string, unknown>) =>
    nodeConfig({ topic, groupId, output, dlq, repository, extra });

  // A: started first, so it meets the records as they trickle in (one-record fetches, one-record chunks).
  const a = await startNodeInProcess(t, config(await rocksdbRepository(t)));
  const ids = await first(producer, topic);
  const distinct = [...new Set(ids)];
  await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
  await a.handle.stop();
  assert.equal(a.handle.totals().recordsOut, distinct.length, 'A forwarded each id once');

  // The changelog holds a live mark for every id A forwarded.
  const marks = await changelogMarks(kafka, changelog, distinct.length);
  assert.deepEqual(
    [...marks].sort(),
    [...distinct].sort(),
    'the changelog holds a mark for each forwarded id',
  );

  // B: an empty store, the same group; every id again, in one request.
  await producer.send({
    topic,
    acks: -1,
    messages: distinct.map((uid) => ({
      key: uid,
      value: JSON.stringify({ uid, tag: 'again' }),
      partition: 0,
    })),
  });
  const b = await startNodeInProcess(t, config({ type: 'memory' }));
  await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
  await b.handle.stop();
  const restored = (await b.handle.metrics.restoredIds.get()).values[0]?.value ?? 0;
  assert.equal(restored, distinct.length, 'B restored every mark');
  assert.equal(b.handle.totals().recordsOut, 0, 'B forwarded none of them again');
  assert.equal(b.handle.totals().duplicates, distinct.length);
  const counts = await committedUidCounts(kafka, output, distinct.length);
  assert.deepEqual(
    [...counts.entries()].filter(([, n]) => n !== 1),
    [],
    'each id exactly once in the output',
  );
  assert.equal(counts.size, distinct.length);
}

for (const guarantee of ['exactly-once', 'at-least-once'] as const) {
  const label = guarantee === 'exactly-once' ? 'exactly-once' : 'at-least-once with changelog.enabled';
  describe(`dedup node over a logged store, ${label}`, { skip: skipUnlessEnabled('kafka') }, () => {
    it('a trickle of one-record chunks handed over to an empty instance gives no duplicate', {
      timeout: 180_000,
    }, async (t) => {
      await handover(t, guarantee, async (producer, topic) => {
        const ids = Array.from({ length: 30 }, (_, i) => `u-${i}`);
        await trickle(producer, topic, ids, 120, 'first');
        return ids;
      });
    });

    it('a chunk whose records all share one id is marked in the changelog', {
      timeout: 180_000,
    }, async (t) => {
      await handover(t, guarantee, async (producer, topic) => {
        const ids = Array.from({ length: 6 }, () => 'u-same');
        await producer.send({
          topic,
          acks: -1,
          messages: ids.map((uid, i) => ({
            key: uid,
            value: JSON.stringify({ uid, copy: i }),
            partition: 0,
          })),
        });
        return ids;
      });
    });
  });
}
