import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { testProducer, waitForCommitted } from '../helpers/kafka.js';
import {
  assertInputLanded,
  dedupInput,
  forwardingOrDrained,
  nodeConfig,
  nodeTestbed,
  prng,
  produceInput,
  rocksdbRepository,
  startNodeProcess,
  writeNodeConfig,
} from '../helpers/node.js';
import { soakSize } from '../helpers/soak.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedReport } from './exactly-once-input.js';

// CI: 8 kills over 80,000 records. Each kill lands at a random point 0-0.5 s into a restarted run, between any
// two of its steps (transaction begin, produce, offsets, commit, checkpoint), so 8 already cover every window the
// test was written for; the soak (IDEM_SOAK=1) keeps the 20 kills over 200,000 records CI used to run.
const KILLS = soakSize('NODE_EOS_KILLS', { ci: 8, soak: 20 });
const RECORDS = soakSize('NODE_EOS_RECORDS', { ci: 80_000, soak: 200_000 });
const BATCH_SIZE = 500;

describe('exactly-once dedup node killed with SIGKILL', { skip: skipUnlessEnabled('kafka') }, () => {
  it(`${KILLS} SIGKILLs at random points: each distinct id exactly once in the committed output`, {
    timeout: 600_000,
  }, async (t) => {
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t);
    // 10% duplicates: inside a chunk, in a later chunk, and in another partition under another key (one
    // instance holds every partition in one store, so it catches those too).
    const data = dedupInput({ records: RECORDS, duplicateShare: 0.1, partitions: 3, batchSize: BATCH_SIZE });
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
        batchSize: BATCH_SIZE,
        perfInterval: '200ms',
        extra: { output: { guarantee: 'exactly-once' } },
      }),
    );
    t.after(() => admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined));
    const random = prng(21);
    let kills = 0;
    let drained = false;
    while (kills < KILLS && !drained) {
      const node = startNodeProcess(t, path);
      // Forwarding again: a restart waits for the killed member's session to lapse, then restores. A quick
      // machine may have finished the input before the last kills: then there is nothing left to interrupt.
      drained = await forwardingOrDrained(node, admin, groupId, topic).catch((error: unknown) => {
        const tail = node.logs.filter((l) => !l.perf).slice(-20);
        throw new Error(`restart ${kills + 1} did not forward: ${JSON.stringify(tail)}`, { cause: error });
      });
      if (!drained) await sleep(Math.floor(random() * 500));
      if (node.child.exitCode !== null) assert.fail('the node exited by itself');
      node.child.kill('SIGKILL');
      await node.exited;
      if (!drained) kills++;
    }
    const last = startNodeProcess(t, path);
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 180_000 });
    assert.deepEqual(await last.stop('SIGTERM'), { code: 0, signal: null });

    assert.ok(kills >= 3, `only ${kills} kills before the input was done: the run tested too little`);
    const report = await committedReport(kafka, output, data);
    t.diagnostic(
      `${kills} SIGKILLs over ${data.total} records: ${report.records} committed output records, ` +
        `${report.distinct} distinct, ${report.leaked} duplicates`,
    );
    assert.deepEqual(report.missing, [], 'no uid lost');
    assert.equal(report.distinct, data.distinct);
    assert.equal(report.leaked, 0, 'no duplicate in the committed output');
  });
});
