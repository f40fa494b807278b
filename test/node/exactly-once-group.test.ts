import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { testProducer, waitForCommitted } from '../helpers/kafka.js';
import {
  forwardingOrDrained,
  type LogLine,
  type NodeTestbed,
  nodeConfig,
  nodeTestbed,
  produceInput,
  rocksdbRepository,
  startNodeProcess,
  writeNodeConfig,
} from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedReport, keyedDedupInput } from './exactly-once-input.js';

const BATCH_SIZE = 500;

/** A config file for one more instance of the group: exactly-once, its own RocksDB store. */
async function instanceConfig(t: TestContext, bed: NodeTestbed): Promise<string> {
  const { topic, groupId, output, dlq } = bed;
  return writeNodeConfig(
    t,
    nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      repository: await rocksdbRepository(t),
      batchSize: BATCH_SIZE,
      perfInterval: '200ms',
      extra: { output: { guarantee: 'exactly-once' } },
    }),
  );
}

const forwarding = (l: LogLine) => ((l.perf as { rowsOut?: number } | undefined)?.rowsOut ?? 0) > 0;

/** What a zombie logs when it runs again after its partitions moved. */
const ZOMBIE_BACK = [
  'partition fenced by a newer owner: its work is dropped',
  'the group rebalanced during a chunk: its transaction is aborted, the records are read again',
  'joined the group',
];

describe('exactly-once dedup nodes in one group', { skip: skipUnlessEnabled('kafka') }, () => {
  it('three rebalances (B joins, A killed, C joins), input keyed by id: 0 lost, 0 duplicates', {
    timeout: 300_000,
  }, async (t) => {
    const partitions = 4;
    const bed = await nodeTestbed(t, { partitions });
    const { kafka, admin, topic, output, groupId } = bed;
    t.after(() => admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined));
    const data = keyedDedupInput({ records: 80_000, duplicateShare: 0.1, partitions, batchSize: BATCH_SIZE });
    await produceInput(await testProducer(t, kafka), topic, data);

    const a = startNodeProcess(t, await instanceConfig(t, bed));
    await a.waitForLog(forwarding, 90_000);
    // Rebalance 1: B joins and takes partitions A has worked on (B restores their marks first).
    const b = startNodeProcess(t, await instanceConfig(t, bed));
    // Forwarding, or the input is done: on a quick machine A may finish the topic before B's join completes (CI
    // once timed out here waiting for B). A timeout says where B got to.
    await forwardingOrDrained(b, admin, groupId, topic).catch((error: unknown) => {
      const tail = [...a.logs, ...b.logs].filter((l) => !l.perf).slice(-20);
      throw new Error(`B neither forwarded nor saw the input done: ${JSON.stringify(tail)}`, {
        cause: error,
      });
    });
    // Rebalance 2: A is killed mid-chunk; B takes everything once A's session lapses.
    a.child.kill('SIGKILL');
    await a.exited;
    // Rebalance 3: C joins.
    const c = startNodeProcess(t, await instanceConfig(t, bed));
    // Joined, not "restored": on a quick machine B may have drained the input before C joins, and C then has
    // no batch that makes it restore (CI saw that race once).
    await c.waitForLog((l) => l.msg === 'joined the group', 90_000);
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 200_000 });
    assert.deepEqual(await b.stop('SIGTERM'), { code: 0, signal: null });
    assert.deepEqual(await c.stop('SIGTERM'), { code: 0, signal: null });

    const report = await committedReport(kafka, output, data);
    const restored = [...b.logs, ...c.logs].filter((l) => /^restored \d+ ids/.test(l.msg)).map((l) => l.msg);
    t.diagnostic(`output ${report.records} records, ${report.leaked} duplicates; ${restored.join(' | ')}`);
    assert.deepEqual(report.missing, [], 'no uid lost');
    assert.equal(report.distinct, data.distinct);
    assert.equal(report.leaked, 0, 'no duplicate in the committed output');
  });

  it('fences a zombie: an instance frozen past its session cannot commit output for partitions that moved', {
    timeout: 300_000,
  }, async (t) => {
    const partitions = 2;
    const bed = await nodeTestbed(t, { partitions });
    const { kafka, admin, topic, output, groupId } = bed;
    t.after(() => admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined));
    const data = keyedDedupInput({ records: 60_000, duplicateShare: 0.1, partitions, batchSize: BATCH_SIZE });
    await produceInput(await testProducer(t, kafka), topic, data);

    const zombie = startNodeProcess(t, await instanceConfig(t, bed));
    await zombie.waitForLog(forwarding, 90_000);
    // Frozen in the middle of its work, most likely inside a chunk's transaction.
    zombie.child.kill('SIGSTOP');
    const heir = startNodeProcess(t, await instanceConfig(t, bed));
    // The heir gets both partitions once the zombie's session lapses, fences its transactional ids, restores the
    // zombie's committed marks and finishes the topic.
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 200_000 });
    const frozenLines = zombie.logs.length;
    zombie.child.kill('SIGCONT');
    // Back, it finishes the chunk it was in: that transaction is fenced (per partition: by the heir's producer;
    // per instance: by the group's generation), so nothing of it is committed. Frozen between chunks, it only
    // rejoins the group. Either way the report below is what must hold.
    const back = await zombie.waitForLog(
      (l) => zombie.logs.indexOf(l) >= frozenLines && ZOMBIE_BACK.includes(l.msg),
      60_000,
    );
    t.diagnostic(`the zombie, back: ${back.msg}`);
    assert.deepEqual(await zombie.stop('SIGTERM'), { code: 0, signal: null });
    assert.deepEqual(await heir.stop('SIGTERM'), { code: 0, signal: null });

    const report = await committedReport(kafka, output, data);
    t.diagnostic(`output ${report.records} records, ${report.leaked} duplicates`);
    assert.deepEqual(report.missing, [], 'no uid lost');
    assert.equal(report.leaked, 0, 'the zombie committed no output for the moved partitions');
  });
});
