import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testProducer, waitFor, waitForCommitted } from '../helpers/kafka.js';
import {
  assertInputLanded,
  dedupInput,
  type LogLine,
  nodeConfig,
  produceInput,
  readOutput,
  rocksdbRepository,
  startNodeProcess,
  writeNodeConfig,
} from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { privateBrokerTestbed } from './private-broker.js';

describe('dedup node through a broker outage', { skip: skipUnlessEnabled('kafka') }, () => {
  it('rides out 10 s without a broker and loses nothing, without a restart', {
    // Two starts of a private broker (each a JVM) and 100,000 records, beside three other test files.
    timeout: 600_000,
  }, async (t) => {
    // A broker of this test's own: the outage stops it, never the shared one the other files use.
    const { broker, kafka, admin, topic, output, dlq, groupId } = await privateBrokerTestbed(
      t,
      'idem-outage',
    );
    const batchSize = 500;
    const data = dedupInput({ records: 100_000, duplicateShare: 0.1, partitions: 3, batchSize });
    await produceInput(await testProducer(t, kafka), topic, data);
    await assertInputLanded(admin, topic, data);
    const path = await writeNodeConfig(
      t,
      nodeConfig({
        topic,
        groupId,
        output,
        dlq,
        repository: await rocksdbRepository(t),
        batchSize,
        perfInterval: '200ms',
        extra: { kafka: { brokers: [...broker.brokers] } },
      }),
    );

    const node = startNodeProcess(t, path);
    // Well into the run: some batches committed, most of the topic still to go.
    await waitFor(() => rowsIn(node.logs) >= 10_000, { timeoutMs: 90_000, what: '10,000 records read' });
    const readBefore = rowsIn(node.logs);
    await broker.stop();
    // The outage itself (not a wait for something): the node must ride out 10 s without its broker.
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    await broker.start();

    await waitForCommitted(admin, groupId, topic, { timeoutMs: 200_000 });
    assert.equal(node.child.exitCode, null, 'the same process finished the topic');
    assert.deepEqual(await node.stop('SIGTERM'), { code: 0, signal: null });

    const report = await readOutput(kafka, output, data);
    assert.deepEqual(report.missing, [], 'no uid lost');
    const warnings = new Set(node.logs.filter((l) => l.level >= 40).map((l) => l.msg));
    t.diagnostic(
      `${readBefore} of ${data.total} read when the broker stopped; output ${report.records}, leaked ` +
        `${report.leaked}; warnings: ${[...warnings].join(' | ')}`,
    );
    assert.ok(readBefore < data.total, 'the outage hit the node mid-run');
    // The chunk in flight when the broker went away may be sent twice (a new request after the retries ran out).
    assert.ok(report.leaked <= batchSize, `leaked ${report.leaked} > one chunk (${batchSize})`);
  });
});

/** Rows read so far, from the node's perf log lines. */
function rowsIn(logs: readonly LogLine[]): number {
  return logs.reduce((n, l) => n + ((l.perf as { rowsIn?: number } | undefined)?.rowsIn ?? 0), 0);
}
