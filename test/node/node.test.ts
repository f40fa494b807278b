import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { readDeadLetter } from '../../src/kafka/index.js';
import type { NodeTotals } from '../../src/node/chunk.js';
import {
  committedOffsets,
  consumeAll,
  createTopic,
  createTopicsAndWait,
  kafkaAdmin,
  onCleanup,
  produce,
  randomGroupId,
  randomName,
  testKafka,
  testProducer,
  waitFor,
  waitForCommitted,
} from '../helpers/kafka.js';
import {
  assertInputLanded,
  dedupInput,
  type LogLine,
  nodeConfig,
  nodeTestbed,
  produceInput,
  readOutput,
  redisRepository,
  rocksdbRepository,
  startNodeInProcess,
  startNodeProcess,
  writeNodeConfig,
} from '../helpers/node.js';
import { soakSize } from '../helpers/soak.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const sum = (offsets: Map<number, number>) => [...offsets.values()].reduce((a, b) => a + Math.max(0, b), 0);

/**
 * One-partition input and DLQ, and an output that takes record batches of at most 20 kB: normal requests are cut
 * to fit, one large record is not.
 */
async function narrowOutputTopics(t: TestContext) {
  const kafka = testKafka();
  const admin = await kafkaAdmin(t, kafka);
  const topic = await createTopic(t, admin, { partitions: 1 });
  const dlq = await createTopic(t, admin, { prefix: 'idem-node-dlq', partitions: 1 });
  const output = randomName('idem-node-out');
  await createTopicsAndWait(admin, [
    { topic: output, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: '20000' }] },
  ]);
  onCleanup(t, () => admin.deleteTopics({ topics: [output] }).catch(() => undefined));
  return { kafka, admin, topic, dlq, output, groupId: randomGroupId(t, admin) };
}

describe('dedup node against Kafka', { skip: skipUnlessEnabled('kafka') }, () => {
  it('forwards each uid once, in input order, with 20% duplicates in a chunk, across chunks and across partitions', {
    skip: skipUnlessEnabled('redis'),
    timeout: 240_000,
  }, async (t) => {
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t);
    const batchSize = 500;
    // 60 chunks of 500 in CI show each kind of copy many times over; the soak size is what CI used to run.
    const records = soakSize('NODE_RECORDS', { ci: 30_000, soak: 100_000 });
    const data = dedupInput({ records, duplicateShare: 0.2, partitions: 3, batchSize });
    await produceInput(await testProducer(t, kafka), topic, data);
    await assertInputLanded(admin, topic, data);

    // A shared store, so a duplicate under another key in another partition is caught too.
    const repository = redisRepository(t, randomName('idem-node'));
    const node = await startNodeInProcess(
      t,
      nodeConfig({ topic, groupId, output, dlq, repository, batchSize }),
    );
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 200_000 });

    const report = await readOutput(kafka, output, data, { ordered: true });
    assert.deepEqual(report.missing, [], 'every uid reaches the output');
    assert.equal(report.leaked, 0, 'no uid twice');
    assert.equal(report.distinct, data.distinct);
    const totals = node.handle.totals();
    assert.equal(totals.recordsIn, data.total, 'each input record read once');
    assert.equal(totals.duplicates, data.total - data.distinct);
    assert.equal(totals.deadLettered, 0);
  });

  it('serves metrics, logs perf, and on SIGTERM finishes, commits and exits 0; a restart reads nothing twice', {
    timeout: 180_000,
  }, async (t) => {
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t);
    const data = dedupInput({ records: 40_000, duplicateShare: 0.2, partitions: 3, batchSize: 200 });
    await produceInput(await testProducer(t, kafka), topic, data);
    // The default store (RocksDB), metrics off in the file and turned on by the environment.
    const config = nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      repository: await rocksdbRepository(t),
      batchSize: 200,
    });
    const path = await writeNodeConfig(t, config);
    const env = { IDEM__METRICS__ENABLED: 'true', IDEM__METRICS__PORT: '0', IDEM__PERF__INTERVAL: '250ms' };

    const first = startNodeProcess(t, path, env);
    const running = await first.waitForLog((l) => l.msg === 'dedup node running');
    const port = running.metricsPort as number;
    assert.ok(port > 0, 'metrics port in the start line');
    const perf = await first.waitForLog((l) => /^dedup perf over/.test(l.msg) && hasRows(l));
    assert.match(
      perf.msg,
      /rows in, \d+ out \(\d+ dropped\), \d+ iterations \(\d+ input-starved\); poll=.*parse=.*lookup=.*produce=.*deliver=.*mark=.*commit=\d/,
    );
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (const name of [
      'idem_node_records_in_total',
      'idem_node_records_out_total',
      'idem_node_duplicates_dropped_total',
      'idem_node_records_without_id_total',
      'idem_node_dlq_records_total',
      'idem_node_batch_duration_seconds_bucket',
      'idem_node_store_operation_duration_seconds_bucket{le="0.001",operation="lookup"}',
      'idem_node_consumer_lag{topic=',
    ]) {
      assert.ok(metrics.includes(name), `metrics expose ${name}`);
    }

    // Mid-run (it has handled rows but not all): SIGTERM.
    const exit = await first.stop('SIGTERM');
    assert.deepEqual(exit, { code: 0, signal: null }, 'SIGTERM exits 0');
    const read = totalsOf(first.logs).recordsIn;
    const committed = sum(await committedOffsets(admin, groupId, topic));
    assert.equal(committed, read, 'everything read before the stop was committed');
    if (read >= data.total) t.diagnostic('the first run finished the topic before SIGTERM arrived');

    const second = startNodeProcess(t, path, env);
    await second.waitForLog((l) => l.msg === 'dedup node running');
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 120_000 });
    assert.deepEqual(await second.stop('SIGTERM'), { code: 0, signal: null });
    assert.equal(
      totalsOf(second.logs).recordsIn,
      data.total - read,
      'the restart reads only what the first run left',
    );

    const report = await readOutput(kafka, output, data, { ordered: true });
    assert.deepEqual(report.missing, []);
    assert.equal(report.leaked, 0, 'a graceful stop repeats nothing');
  });

  it('refuses to start on a missing input or an output with fewer partitions', async (t) => {
    const kafka = testKafka();
    const admin = await kafkaAdmin(t, kafka);
    const topic = await createTopic(t, admin, { partitions: 3 });
    const narrow = await createTopic(t, admin, { partitions: 1, prefix: 'idem-node-out' });
    const groupId = randomGroupId(t, admin);
    const base = { groupId, dlq: randomName('idem-node-dlq'), repository: { type: 'memory' } };
    await assert.rejects(
      startNodeInProcess(t, nodeConfig({ ...base, topic: randomName('idem-missing'), output: narrow })),
      (error: unknown) =>
        error instanceof ConfigError && /^input\.topic: .*does not exist/.test(error.message),
    );
    await assert.rejects(
      startNodeInProcess(t, nodeConfig({ ...base, topic, output: narrow })),
      (error: unknown) =>
        error instanceof ConfigError && /^output\.topic: .*1 partitions, fewer than .*3/.test(error.message),
    );
  });

  it('dead-letters invalid JSON, a missing or unusable id and a record the output refuses, and carries on', {
    timeout: 120_000,
  }, async (t) => {
    const { kafka, admin, topic, dlq, output, groupId } = await narrowOutputTopics(t);

    const good = (i: number) => ({
      key: `k${i}`,
      value: JSON.stringify({ uid: `g-${i}`, pad: 'x'.repeat(100) }),
    });
    const poison = [
      { key: 'p1', value: '{"uid": "broken' },
      { key: 'p2', value: '{"other": 1}' },
      { key: 'p3', value: '{"uid": {"nested": true}}' },
      { key: 'p4', value: JSON.stringify({ uid: 'too-big', pad: 'x'.repeat(30_000) }) },
    ];
    const messages = [
      ...Array.from({ length: 300 }, (_, i) => good(i)),
      ...poison,
      ...Array.from({ length: 300 }, (_, i) => good(300 + i)),
      good(5), // a duplicate, to show dedup still runs around the poison
    ];
    await produce(await testProducer(t, kafka), topic, messages);
    const node = await startNodeInProcess(
      t,
      nodeConfig({ topic, groupId, output, dlq, repository: { type: 'memory' }, batchSize: 1000 }),
    );
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });

    const out = await consumeAll(kafka, output);
    assert.deepEqual(
      out.map((r) => r.key?.toString()),
      Array.from({ length: 600 }, (_, i) => `k${i}`),
      'every good record once, in order',
    );
    const letters = (await consumeAll(kafka, dlq)).map((r) => ({
      key: r.key?.toString(),
      info: readDeadLetter(r.headers),
    }));
    assert.deepEqual(
      letters.map((l) => [l.key, l.info?.reason]),
      [
        ['p1', 'invalid-json'],
        ['p2', 'no-id'],
        ['p3', 'invalid-id'],
        ['p4', 'handler-failed'],
      ],
    );
    const big = letters[3]?.info;
    assert.match(big?.error ?? '', /larger than the max message size/);
    assert.equal(big?.offset, '303');
    assert.ok((big?.attempts ?? 0) >= 1);
    assert.equal(node.handle.totals().deadLettered, 4);
    await waitFor(() => node.logs.some((l) => l.msg === 'output refused records'));
  });

  it("forwards the next chunk's copy of a record the output refused", {
    timeout: 120_000,
  }, async (t) => {
    const { kafka, admin, topic, dlq, output, groupId } = await narrowOutputTopics(t);
    const good = (i: number) => ({ key: `k${i}`, value: JSON.stringify({ uid: `g-${i}` }) });
    // Chunks of 10: the too large record ends the first; its id comes again, small, in the second (which may be
    // read before the first is marked).
    const messages = [
      ...Array.from({ length: 9 }, (_, i) => good(i)),
      { key: 'big', value: JSON.stringify({ uid: 'again', pad: 'x'.repeat(30_000) }) },
      good(9),
      { key: 'small', value: JSON.stringify({ uid: 'again' }) },
      ...Array.from({ length: 8 }, (_, i) => good(10 + i)),
    ];
    await produce(await testProducer(t, kafka), topic, messages);
    const node = await startNodeInProcess(
      t,
      nodeConfig({ topic, groupId, output, dlq, repository: { type: 'memory' }, batchSize: 10 }),
    );
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });

    const out = await consumeAll(kafka, output);
    assert.deepEqual(
      out.map((r) => r.key?.toString()),
      [
        ...Array.from({ length: 10 }, (_, i) => `k${i}`),
        'small',
        ...Array.from({ length: 8 }, (_, i) => `k${10 + i}`),
      ],
      'the small copy of the refused record is forwarded, in order',
    );
    const letters = (await consumeAll(kafka, dlq)).map((r) => [
      r.key?.toString(),
      readDeadLetter(r.headers)?.reason,
    ]);
    assert.deepEqual(letters, [['big', 'handler-failed']]);
    assert.equal(node.handle.totals().duplicates, 0);
  });

  it('dedup.missingId = "forward" writes records without the field through, and warns once when a chunk had none', {
    timeout: 120_000,
  }, async (t) => {
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t, { partitions: 1 });
    await produce(await testProducer(t, kafka), topic, [
      { key: 'a', value: '{"uid":"u1"}' },
      { key: 'b', value: '{"other":1}' },
      { key: 'c', value: '{"uid":"u1"}' },
    ]);
    const node = await startNodeInProcess(
      t,
      nodeConfig({
        topic,
        groupId,
        output,
        dlq,
        repository: { type: 'memory' },
        batchSize: 1,
        extra: { dedup: { missingId: 'forward' } },
      }),
    );
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });
    const out = await consumeAll(kafka, output);
    assert.deepEqual(
      out.map((r) => r.key?.toString()),
      ['a', 'b'],
      'the record without uid is forwarded, the repeat of u1 dropped',
    );
    assert.equal((await consumeAll(kafka, dlq)).length, 0);
    const warnings = node.logs.filter((l) => l.code === 'IDEM_NO_ID');
    assert.equal(warnings.length, 1, JSON.stringify(node.logs.map((l) => l.msg)));
    assert.match(String(warnings[0]?.msg), /no dedup id at value path uid.*missingId/);
  });

  it('keeps distinct ids distinct: integers above 2^53 keep their digits, an id that is not UTF-8 is dead-lettered', {
    timeout: 120_000,
  }, async (t) => {
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t, { partitions: 1 });
    const utf8Bad = (byte: number) =>
      Buffer.concat([Buffer.from('{"uid":"user-'), Buffer.from([byte]), Buffer.from('"}')]);
    await produce(await testProducer(t, kafka), topic, [
      { key: 'big-3', value: '{"uid":9007199254740993}' },
      { key: 'big-2', value: '{"uid":9007199254740992}' },
      { key: 'big-3-again', value: '{"uid":9007199254740993.0}' },
      { key: 'bad-ff', value: utf8Bad(0xff) },
      { key: 'bad-fe', value: utf8Bad(0xfe) },
      { key: 'last', value: '{"uid":"last"}' },
    ]);
    await startNodeInProcess(t, nodeConfig({ topic, groupId, output, dlq, repository: { type: 'memory' } }));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });

    const out = await consumeAll(kafka, output);
    assert.deepEqual(
      out.map((r) => r.key?.toString()),
      ['big-3', 'big-2', 'last'],
    );
    const letters = (await consumeAll(kafka, dlq)).map((r) => [
      r.key?.toString(),
      readDeadLetter(r.headers)?.reason,
      readDeadLetter(r.headers)?.error,
    ]);
    assert.deepEqual(letters, [
      ['bad-ff', 'invalid-id', 'id field "uid" is not valid UTF-8'],
      ['bad-fe', 'invalid-id', 'id field "uid" is not valid UTF-8'],
    ]);
  });
});

function hasRows(line: LogLine): boolean {
  return ((line.perf as { rowsIn?: number } | undefined)?.rowsIn ?? 0) > 0;
}

/** The totals of a node's 'stopped cleanly' line. */
function totalsOf(logs: readonly LogLine[]): NodeTotals {
  const line = logs.find((l) => l.msg === 'stopped cleanly');
  assert.ok(line, 'the node logged its stop');
  return line.totals as NodeTotals;
}
