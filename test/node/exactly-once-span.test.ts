import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testProducer, waitForCommitted } from '../helpers/kafka.js';
import { nodeConfig, nodeTestbed, rocksdbRepository, startNodeInProcess } from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedUidCounts } from './exactly-once-input.js';

/**
 * Exactly-once, one transaction spans several chunks of a batch (src/node/batch-loop.ts, `Span`): a chunk's
 * lookups see the marks an earlier chunk of the same transaction staged, and the offsets and counts are those of
 * the committed transactions.
 */
describe('dedup node, exactly-once transaction over several chunks', {
  skip: skipUnlessEnabled('kafka'),
}, () => {
  it('drops a duplicate of an id forwarded by the previous chunk of its transaction', {
    timeout: 120_000,
  }, async (t) => {
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t, { partitions: 1 });
    const batchSize = 100;
    const records = 2_200;
    // Every tenth record from the 110th on repeats the id 105 records earlier (an original): one chunk of 100 back,
    // so inside the same transaction unless a span ended in between.
    const uids: string[] = [];
    for (let position = 0, next = 0; position < records; position++) {
      uids.push(position >= 110 && position % 10 === 0 ? (uids[position - 105] as string) : `u-${next++}`);
    }
    const forwarded = new Set(uids).size;
    const producer = await testProducer(t, kafka);
    const messages = uids.map((uid, n) => ({ key: uid, value: JSON.stringify({ uid, n }), partition: 0 }));
    await producer.send({ topic, acks: -1, messages });
    const config = nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      batchSize,
      repository: await rocksdbRepository(t),
      extra: { output: { guarantee: 'exactly-once' } },
    });
    const node = await startNodeInProcess(t, config);
    t.after(() => admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });
    await node.handle.stop();

    const counts = await committedUidCounts(kafka, output, forwarded);
    assert.equal(counts.size, forwarded, 'every distinct id forwarded');
    assert.deepEqual(
      [...counts].filter(([, n]) => n !== 1),
      [],
      'each id exactly once',
    );
    const { recordsIn, recordsOut, duplicates } = node.handle.totals();
    // Counted once their transaction committed; a batch read again after an abort is counted again.
    assert.ok(recordsIn >= uids.length, `${recordsIn} records counted, ${uids.length} produced`);
    assert.equal(recordsIn, recordsOut + duplicates);
    const transactions = await node.handle.metrics.transactions.get();
    const committed = transactions.values.find((v) => v.labels.result === 'committed')?.value ?? 0;
    const chunks = Math.ceil(uids.length / batchSize);
    assert.ok(committed > 0, 'transactions committed');
    assert.ok(
      committed < chunks,
      `${committed} transactions for ${chunks} chunks: some spanned several chunks`,
    );
  });
});
