import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Partitioners } from 'kafkajs';
import { committedOffsets, endOffsets, onCleanup, waitFor } from '../helpers/kafka.js';
import {
  dedupInput,
  type LogLine,
  nodeConfig,
  produceInput,
  rocksdbRepository,
  startNodeProcess,
  writeNodeConfig,
} from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedReport } from './exactly-once-input.js';
import { privateBrokerTestbed } from './private-broker.js';

describe('exactly-once dedup node through a broker outage', { skip: skipUnlessEnabled('kafka') }, () => {
  it('rides out 10 s without its broker: no loss, no duplicate, no restart', {
    timeout: 480_000,
  }, async (t) => {
    const { broker, kafka, topic, output, dlq, groupId } = await privateBrokerTestbed(t, 'idem-eos');
    const batchSize = 500;
    const data = dedupInput({ records: 60_000, duplicateShare: 0.1, partitions: 3, batchSize });
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    await produceInput(producer, topic, data);
    await producer.disconnect();
    // Read before the outage: right after the restart the broker may answer ListOffsets with NOT_LEADER.
    const before = kafka.admin();
    await before.connect();
    const ends = await endOffsets(before, topic);
    await before.disconnect();

    const config = nodeConfig({
      topic: topic,
      groupId: groupId,
      output: output,
      dlq: dlq,
      repository: await rocksdbRepository(t),
      batchSize,
      perfInterval: '200ms',
      extra: { kafka: { brokers: [...broker.brokers] }, output: { guarantee: 'exactly-once' } },
    });
    const node = startNodeProcess(t, await writeNodeConfig(t, config));
    await waitFor(() => rowsIn(node.logs) >= 10_000, { timeoutMs: 120_000, what: '10,000 records read' });
    const readBefore = rowsIn(node.logs);
    await broker.stop();
    await sleep(10_000);
    await broker.start();

    const after = kafka.admin();
    await after.connect();
    onCleanup(t, () => after.disconnect());
    // The restarted broker answers "coordinator loading" for a while: keep asking.
    let committed: Map<number, number> | undefined;
    await waitFor(
      async () => {
        committed = await committedOffsets(after, groupId, topic).catch(() => undefined);
        return committed !== undefined && [...ends].every(([p, end]) => committed?.get(p) === end);
      },
      { timeoutMs: 300_000, intervalMs: 500, what: 'the group to commit the whole input' },
    ).catch((error: unknown) => {
      // What a stall looks like from outside: where each partition stopped, and what the node said last.
      t.diagnostic(
        `end offsets ${JSON.stringify([...ends])}, committed ${JSON.stringify([...(committed ?? [])])}`,
      );
      t.diagnostic(`rows read: ${rowsIn(node.logs)}; process exit code: ${node.child.exitCode}`);
      for (const line of node.logs.filter((l) => l.level !== 30 || l.perf === undefined).slice(-60))
        t.diagnostic(JSON.stringify(line).slice(0, 600));
      throw error;
    });
    assert.equal(node.child.exitCode, null, 'the same process finished the topic');
    assert.deepEqual(await node.stop('SIGTERM'), { code: 0, signal: null });

    const report = await committedReport(kafka, output, data);
    const warnings = new Set(node.logs.filter((l) => l.level >= 40).map((l) => l.msg));
    t.diagnostic(
      `${readBefore} of ${data.total} read when the broker stopped; output ${report.records}, duplicates ` +
        `${report.leaked}; warnings: ${[...warnings].join(' | ')}`,
    );
    assert.ok(readBefore < data.total, 'the outage hit the node mid-run');
    assert.deepEqual(report.missing, [], 'no uid lost');
    assert.equal(report.distinct, data.distinct);
    assert.equal(report.leaked, 0, 'no duplicate in the committed output');
  });
});

/** Rows read so far, from the node's perf log lines. */
function rowsIn(logs: readonly LogLine[]): number {
  return logs.reduce((n, l) => n + ((l.perf as { rowsIn?: number } | undefined)?.rowsIn ?? 0), 0);
}
