import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import type { Admin, Kafka } from 'kafkajs';
import {
  committedOffsets,
  createTopic,
  createTopicsAndWait,
  endOffsets,
  kafkaAdmin,
  randomGroupId,
  randomName,
  testKafka,
  waitFor,
  waitForCommitted,
} from '../helpers/kafka.js';
import {
  assertInputLanded,
  type DedupInput,
  dedupInput,
  nodeConfig,
  prng,
  produceInput,
  readOutput,
  redisRepository,
  rocksdbRepository,
  startNodeProcess,
  writeNodeConfig,
} from '../helpers/node.js';
import { soakSize } from '../helpers/soak.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

/**
 * SIGKILLs per run. Each lands at a random point of the input still to do, by the group's committed progress, not
 * by time: a node that finished 60,000 records within the second a timed kill waited left too few kills.
 */
const KILLS = 5;
const BATCH_SIZE = 500;
// CI: 60,000 records; the soak (IDEM_SOAK=1) keeps the 200,000 CI used to run.
const RECORDS = soakSize('NODE_CRASH_RECORDS', { ci: 60_000, soak: 200_000 });

/**
 * The node as a child process, killed with SIGKILL at random points and restarted, until it has been killed
 * KILLS times; then it runs to the end. Every uid must reach the output. A kill can repeat only the chunk
 * between its produce and its mark (one chunk: partitions are handled one at a time), so the leaked duplicates
 * are at most KILLS x BATCH_SIZE.
 */
async function crashRun(
  t: TestContext,
  kafka: Kafka,
  admin: Admin,
  topic: string,
  data: DedupInput,
  repository: Record<string, unknown>,
  seed: number,
): Promise<void> {
  const output = await createTopic(t, admin, { prefix: 'idem-node-out' });
  const dlq = await createTopic(t, admin, { prefix: 'idem-node-dlq', partitions: 1 });
  const groupId = randomGroupId(t, admin);
  const path = await writeNodeConfig(
    t,
    nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      repository,
      batchSize: BATCH_SIZE,
      perfInterval: '200ms',
      // A fetch of about one chunk, so the group commits as it goes (4 MiB fetched a whole partition, committed
      // at its end) and the kills can be placed by committed progress.
      extra: { input: { maxBytesPerPartition: 64 * 1024 } },
    }),
  );
  const random = prng(seed);
  const ends = await endOffsets(admin, topic);
  const total = [...ends.values()].reduce((sum, end) => sum + end, 0);
  const progress = async () => {
    const committed = await committedOffsets(admin, groupId, topic).catch(() => new Map<number, number>());
    return [...ends.keys()].reduce((sum, p) => sum + Math.max(0, committed.get(p) ?? 0), 0);
  };
  let kills = 0;
  let drained = false;
  while (kills < KILLS && !drained) {
    const node = startNodeProcess(t, path);
    // Kill once the group has committed past a random point of what is left, so that every kill still to come
    // has input left to interrupt (a restart first waits for the killed member's session to lapse, ~6 s).
    const done = await progress();
    const target = done + 1 + Math.floor(random() * ((total - done) / (KILLS - kills + 1)));
    await waitFor(
      async () => {
        const now = await progress();
        drained = now >= total;
        return drained || now >= target;
      },
      { timeoutMs: 90_000, intervalMs: 20, what: `the group to commit ${target} of ${total} records` },
    );
    if (node.child.exitCode !== null) assert.fail('the node exited by itself');
    node.child.kill('SIGKILL');
    await node.exited;
    if (!drained) kills++;
  }
  assert.ok(kills >= 2, `only ${kills} kills before the input was done: the run tested too little`);
  const last = startNodeProcess(t, path);
  await waitForCommitted(admin, groupId, topic, { timeoutMs: 180_000 });
  assert.deepEqual(await last.stop('SIGTERM'), { code: 0, signal: null });

  const report = await readOutput(kafka, output, data);
  assert.deepEqual(report.missing, [], 'no uid lost');
  assert.equal(report.distinct, data.distinct);
  const bound = kills * BATCH_SIZE;
  t.diagnostic(
    `${kills} SIGKILLs over ${data.total} records: ${report.leaked} leaked duplicates (bound ${bound} = ` +
      `${kills} kills x ${BATCH_SIZE} batch size), ${report.records} output records`,
  );
  assert.ok(report.leaked <= bound, `leaked ${report.leaked} > bound ${bound}`);
}

describe('dedup node killed with SIGKILL mid-run', { skip: skipUnlessEnabled('kafka') }, () => {
  const kafka = testKafka();
  let admin: Admin;
  let topic: string;
  let data: DedupInput;

  // One input topic for both stores: producing it is the slow part.
  before(async () => {
    admin = kafka.admin();
    await admin.connect();
    topic = randomName('idem-node-crash');
    await createTopicsAndWait(admin, [{ topic, numPartitions: 3 }]);
    data = dedupInput({ records: RECORDS, duplicateShare: 0.1, partitions: 3, batchSize: BATCH_SIZE });
    const producer = kafka.producer();
    await producer.connect();
    try {
      await produceInput(producer, topic, data);
    } finally {
      await producer.disconnect();
    }
    await assertInputLanded(admin, topic, data);
  });
  after(async () => {
    await admin?.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin?.disconnect();
  });

  it('loses nothing and leaks at most one chunk per kill (RocksDB, local state)', {
    timeout: 240_000,
  }, async (t) => {
    await crashRun(t, kafka, await kafkaAdmin(t, kafka), topic, data, await rocksdbRepository(t), 11);
  });

  it('loses nothing and leaks at most one chunk per kill (Redis, shared state)', {
    skip: skipUnlessEnabled('redis'),
    timeout: 240_000,
  }, async (t) => {
    const repository = redisRepository(t, randomName('idem-node-crash'));
    await crashRun(t, kafka, await kafkaAdmin(t, kafka), topic, data, repository, 12);
  });
});
