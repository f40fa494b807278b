import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { onCleanup, testProducer, waitForCommitted } from '../helpers/kafka.js';
import {
  assertInputLanded,
  type DedupInput,
  dedupInput,
  forwardingOrDrained,
  type NodeTestbed,
  nodeConfig,
  nodeTestbed,
  prng,
  produceInput,
  rocksdbRepository,
  startNodeInProcess,
  startNodeProcess,
  writeNodeConfig,
} from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedReport, committedUidCounts } from './exactly-once-input.js';

// Exactly-once's two transactional producer layouts on @platformatic/kafka, whatever client the rest of the run
// uses (IDEM_KAFKA_CLIENT): per-instance is the default there, and per-partition must keep working on it.
// @kafka-client-pinned: the test runner runs this file once, not once per client.

const BATCH_SIZE = 500;
const KILLS = 3;

async function config(
  t: TestContext,
  bed: NodeTestbed,
  repository: Record<string, unknown>,
  output: Record<string, unknown>,
): Promise<string> {
  return writeNodeConfig(
    t,
    nodeConfig({
      topic: bed.topic,
      groupId: bed.groupId,
      output: bed.output,
      dlq: bed.dlq,
      repository,
      batchSize: BATCH_SIZE,
      perfInterval: '200ms',
      extra: { kafka: { client: 'platformatic' }, output: { guarantee: 'exactly-once', ...output } },
    }),
  );
}

/** A testbed whose input holds 60,000 records with 10 % duplicates; its changelog is deleted after the test. */
async function filledTestbed(t: TestContext): Promise<{ bed: NodeTestbed; data: DedupInput }> {
  const bed = await nodeTestbed(t);
  const { kafka, admin, topic, output, groupId } = bed;
  t.after(() => admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined));
  const data = dedupInput({ records: 60_000, duplicateShare: 0.1, partitions: 3, batchSize: BATCH_SIZE });
  await produceInput(await testProducer(t, kafka), topic, data);
  await assertInputLanded(admin, topic, data);
  return { bed, data };
}

/** Starts the node `KILLS` times and SIGKILLs it while it forwards, then lets a last run finish the topic. */
async function killAndRestart(
  t: TestContext,
  bed: NodeTestbed,
  path: string,
): Promise<{ kills: number; logs: string[] }> {
  const { admin, groupId, topic } = bed;
  const random = prng(7);
  const logs: string[] = [];
  let kills = 0;
  let drained = false;
  while (kills < KILLS && !drained) {
    const node = startNodeProcess(t, path);
    drained = await forwardingOrDrained(node, admin, groupId, topic);
    if (!drained) await sleep(Math.floor(random() * 300));
    node.child.kill('SIGKILL');
    await node.exited;
    logs.push(...node.logs.filter((l) => !l.perf).map((l) => String(l.msg)));
    if (!drained) kills++;
  }
  const last = startNodeProcess(t, path);
  await waitForCommitted(admin, groupId, topic, { timeoutMs: 180_000 });
  assert.deepEqual(await last.stop('SIGTERM'), { code: 0, signal: null });
  logs.push(...last.logs.filter((l) => !l.perf).map((l) => String(l.msg)));
  return { kills, logs };
}

describe('exactly-once on @platformatic/kafka: both producer layouts', {
  skip: skipUnlessEnabled('kafka'),
}, () => {
  it('per-instance: a restarted instance aborts the transaction its killed run left open, at once', {
    timeout: 400_000,
  }, async (t) => {
    const { bed, data } = await filledTestbed(t);
    const { kafka, output } = bed;
    // A transaction timeout far longer than the test: only the restarted instance's own init (same instance id,
    // kept beside its RocksDB store) can end the transaction a kill left open. Were it left open, the
    // read_committed output would stop at it and the report below would miss every record after it.
    const path = await config(t, bed, await rocksdbRepository(t), { transactionTimeout: '15m' });
    const { kills, logs } = await killAndRestart(t, bed, path);
    assert.ok(kills >= 1, 'the input was done before the first kill: the run tested nothing');
    assert.ok(
      logs.some(
        (m) => m === 'exactly-once with one transactional producer for this instance, fenced by the group',
      ),
      'the node ran per-instance',
    );
    const report = await committedReport(kafka, output, data, { settleMs: 5_000 });
    t.diagnostic(`${kills} SIGKILLs: ${report.records} committed records, ${report.leaked} duplicates`);
    assert.deepEqual(report.missing, [], 'no uid lost or held behind an open transaction');
    assert.equal(report.leaked, 0, 'no duplicate in the committed output');
  });

  it('per-instance: a restart reads every assigned partition back before the first chunk', {
    timeout: 120_000,
  }, async (t) => {
    // The repro of a CI failure: a kill between a span's commit and its local apply, then a restart whose records
    // came from another partition only; that partition's restore alone missed the killed run's last marks, and
    // copies of those ids in the other partition passed. Here deterministically: an instance that keeps its id
    // (output.instanceId) but not its disk, so the changelog alone remembers partition 1's ids.
    const bed = await nodeTestbed(t);
    const { kafka, admin, topic, output, dlq, groupId } = bed;
    onCleanup(t, () =>
      admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined),
    );
    const producer = await testProducer(t, kafka);
    const ids = Array.from({ length: 300 }, (_, i) => `u-${i}`);
    const send = (partition: number, uids: readonly string[]) =>
      producer.send({
        topic,
        acks: -1,
        messages: uids.map((uid) => ({
          key: `${uid}-${partition}`,
          partition,
          value: JSON.stringify({ uid }),
        })),
      });
    const run = async () => {
      const node = await startNodeInProcess(
        t,
        nodeConfig({
          topic,
          groupId,
          output,
          dlq,
          repository: await rocksdbRepository(t),
          extra: {
            kafka: { client: 'platformatic' },
            output: { guarantee: 'exactly-once', instanceId: 'kept-id-new-disk' },
          },
        }),
      );
      await waitForCommitted(admin, groupId, topic);
      await node.handle.stop();
    };
    await send(1, ids);
    await run();
    await send(2, ids.slice(0, 100));
    await run();
    const counts = await committedUidCounts(kafka, output, ids.length);
    assert.equal(counts.size, ids.length);
    assert.deepEqual(
      [...counts].filter(([, n]) => n > 1).map(([uid]) => uid),
      [],
      'partition 2 forwarded copies of ids partition 1 had forwarded',
    );
  });

  it('per-partition still works there: SIGKILLs, 0 lost, 0 duplicates', {
    timeout: 400_000,
  }, async (t) => {
    const { bed, data } = await filledTestbed(t);
    const { kafka, output } = bed;
    const repository = await rocksdbRepository(t);
    const path = await config(t, bed, repository, { transactionalProducer: 'per-partition' });
    const { kills, logs } = await killAndRestart(t, bed, path);
    assert.ok(kills >= 1, 'the input was done before the first kill: the run tested nothing');
    assert.ok(
      !logs.some((m) => m.startsWith('exactly-once with one transactional producer for this instance')),
    );
    const report = await committedReport(kafka, output, data);
    t.diagnostic(`${kills} SIGKILLs: ${report.records} committed records, ${report.leaked} duplicates`);
    assert.deepEqual(report.missing, [], 'no uid lost');
    assert.equal(report.distinct, data.distinct);
    assert.equal(report.leaked, 0, 'no duplicate in the committed output');
  });
});
