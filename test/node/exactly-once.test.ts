import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nodeConfigSchema } from '../../src/node/options.js';
import { testProducer, waitForCommitted } from '../helpers/kafka.js';
import {
  assertInputLanded,
  dedupInput,
  nodeConfig,
  nodeTestbed,
  produceInput,
  rocksdbRepository,
  startNodeInProcess,
} from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedReport, committedUidCounts, produceIds } from './exactly-once-input.js';

describe('dedup node, output.guarantee = "exactly-once"', { skip: skipUnlessEnabled('kafka') }, () => {
  it('writes each distinct id exactly once, marks in the changelog, offsets in the transaction', {
    timeout: 120_000,
  }, async (t) => {
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t);
    const data = dedupInput({ records: 20_000, duplicateShare: 0.1, partitions: 3, batchSize: 500 });
    await produceInput(await testProducer(t, kafka), topic, data);
    await assertInputLanded(admin, topic, data);
    const config = nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      repository: await rocksdbRepository(t),
      extra: { output: { guarantee: 'exactly-once' } },
    });
    const node = await startNodeInProcess(t, config);
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });
    await node.handle.stop();
    const report = await committedReport(kafka, output, data);
    assert.deepEqual(report.missing, [], 'no uid lost');
    assert.equal(report.leaked, 0, 'no duplicate');
    const transactions = await node.handle.metrics.transactions.get();
    const committed = transactions.values.find((v) => v.labels.result === 'committed')?.value ?? 0;
    assert.ok(committed > 0, 'chunks committed in transactions');
    const changelog = `${groupId}-${output}-changelog`;
    const offsets = await admin.fetchTopicOffsets(changelog);
    assert.equal(offsets.length, 3, 'the changelog has the input partition count');
    t.after(() => admin.deleteTopics({ topics: [changelog] }).catch(() => undefined));
  });

  it('restores a moved partition: a duplicate of an id marked by the first instance is dropped by the second', {
    timeout: 120_000,
  }, async (t) => {
    const partitions = 2;
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t, { partitions });
    const producer = await testProducer(t, kafka);
    await produceIds(producer, topic, { start: 0, count: 3_000, partitions, tag: 'first' });
    // Each instance has its own empty in-memory store: only the changelog can tell B what A forwarded.
    const config = nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      repository: { type: 'memory' },
      extra: { output: { guarantee: 'exactly-once' } },
    });
    const a = await startNodeInProcess(t, config);
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
    await a.handle.stop();
    assert.equal(a.handle.totals().recordsOut, 3_000);
    // The new input repeats every id A forwarded, and adds 1,000 new ones.
    await produceIds(producer, topic, { start: 0, count: 4_000, partitions, tag: 'second' });
    const b = await startNodeInProcess(t, config);
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
    await b.handle.stop();
    const restored = (await b.handle.metrics.restoredIds.get()).values[0]?.value ?? 0;
    assert.equal(restored, 3_000, 'B restored the 3,000 marks from the changelog');
    // Each record once: B's chunks of duplicates only are transactions of offsets alone, which once failed on
    // kafkajs (CONCURRENT_TRANSACTIONS, not retried) and made B read its committed chunks again.
    const { recordsIn, duplicates, recordsOut } = b.handle.totals();
    assert.equal(recordsIn, 4_000, 'B read each record produced for it once');
    assert.equal(duplicates, 3_000, 'B dropped every id A had marked');
    assert.equal(recordsOut, 1_000, 'B forwarded only the new ids');
    const counts = await committedUidCounts(kafka, output, 4_000);
    assert.equal(counts.size, 4_000);
    assert.deepEqual(
      [...counts.values()].filter((n) => n !== 1),
      [],
      'each id exactly once',
    );
    t.after(() => admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined));
  });
});

describe('exactly-once config', () => {
  const base = {
    kafka: { brokers: ['127.0.0.1:9092'] },
    input: { topic: 'in' },
    output: { topic: 'out', guarantee: 'exactly-once' },
    dlq: { topic: 'dlq' },
    dedup: { id: 'uid' },
  };

  it('refuses changelog.enabled = false under exactly-once, naming the key', () => {
    const result = nodeConfigSchema.safeParse({ ...base, changelog: { enabled: false } });
    assert.equal(result.success, false);
    assert.deepEqual(result.error?.issues[0]?.path, ['changelog', 'enabled']);
  });

  it('defaults: changelog on under exactly-once, off under at-least-once', () => {
    const eos = nodeConfigSchema.parse(base);
    assert.equal(eos.output.guarantee, 'exactly-once');
    assert.equal(eos.changelog.enabled, undefined);
    const alo = nodeConfigSchema.parse({ ...base, output: { topic: 'out' } });
    assert.equal(alo.output.guarantee, 'at-least-once');
  });
});
