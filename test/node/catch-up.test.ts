import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Producer } from 'kafkajs';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';
import { CatchUp, catchUpDefaults, formatCatchUp } from '../../src/node/catch-up.js';
import { NodeMetrics } from '../../src/node/metrics.js';
import { nodeConfigSchema } from '../../src/node/options.js';
import { testProducer, waitFor, waitForCommitted } from '../helpers/kafka.js';
import {
  type DedupInput,
  dedupInput,
  inputValue,
  type LogLine,
  nodeConfig,
  nodeTestbed,
  readOutput,
  rocksdbRepository,
  startNodeInProcess,
} from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

/** Produces each partition's records from `from` to `to` (fractions of the partition), in offset order. */
async function produceSlice(
  producer: Producer,
  topic: string,
  input: DedupInput,
  from: number,
  to: number,
  perRequest = 2_000,
): Promise<number> {
  let sent = 0;
  await Promise.all(
    input.partitions.map(async (records, partition) => {
      const slice = records.slice(Math.floor(records.length * from), Math.floor(records.length * to));
      for (let i = 0; i < slice.length; i += perRequest) {
        await producer.send({
          topic,
          acks: -1,
          messages: slice.slice(i, i + perRequest).map((r) => ({
            key: r.key,
            value: inputValue(r),
            headers: { seq: String(r.seq) },
            partition,
          })),
        });
      }
      sent += slice.length;
    }),
  );
  return sent;
}

/** `name{labels} value` lines of one metric, by their `partition` label. */
function metricByPartition(text: string, name: string): Map<number, number> {
  const found = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const partition = /partition="(\d+)"/.exec(line)?.[1];
    const value = line.slice(line.lastIndexOf(' ') + 1);
    if (partition !== undefined) found.set(Number(partition), Number(value));
  }
  return found;
}

describe('fast catch-up against Kafka', { skip: skipUnlessEnabled('kafka') }, () => {
  it('a restart far behind catches up in larger chunks and hands over to the head with no gap, reordering or duplicate', {
    timeout: 300_000,
  }, async (t) => {
    const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t);
    const batchSize = 200;
    const catchUpBatch = 2_000;
    const data = dedupInput({ records: 60_000, duplicateShare: 0.2, partitions: 3, batchSize });
    const producer = await testProducer(t, kafka);
    const config = nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      repository: await rocksdbRepository(t),
      batchSize,
      metricsPort: 0,
      perfInterval: '200ms',
      extra: { catchUp: { lagThreshold: 5_000, batchSize: catchUpBatch } },
    });

    // A node that has run before (committed offsets, a warm store), then stopped.
    const warmup = await produceSlice(producer, topic, data, 0, 0.1);
    const first = await startNodeInProcess(t, config);
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 120_000 });
    await first.handle.stop();
    assert.equal(first.handle.totals().recordsIn, warmup);
    assert.ok(
      !first.logs.some((l) => /catching up/.test(l.msg)),
      'a short backlog is handled the ordinary way',
    );

    // The backlog piles up while it is down; the head keeps coming while it catches up.
    const backlog = await produceSlice(producer, topic, data, 0.1, 0.7);
    const second = await startNodeInProcess(t, config);
    const catching = () => second.logs.some((l) => /catching up in chunks/.test(l.msg));
    await waitFor(catching, { timeoutMs: 120_000, what: 'a catch-up to start' });
    const head = await produceSlice(producer, topic, data, 0.7, 1, 500);
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 180_000 });

    const port = second.handle.metricsPort as number;
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const perfLines = second.logs.filter((l: LogLine) => Array.isArray(l.catchUp));
    await second.handle.stop();

    // No gap, no reordering, no duplicate: every uid once, each partition's output in input order, the first
    // copy of each uid wins; and nothing was read twice.
    const report = await readOutput(kafka, output, data, { ordered: true });
    assert.deepEqual(report.missing, [], 'every uid reaches the output');
    assert.equal(report.leaked, 0, 'no uid twice');
    assert.equal(report.distinct, data.distinct);
    assert.equal(second.handle.totals().recordsIn, backlog + head, 'the restart reads each record once');
    assert.equal(
      first.handle.totals().duplicates + second.handle.totals().duplicates,
      data.total - data.distinct,
    );

    // Each partition caught up, and its metrics came down to zero lag.
    const started = metricByPartition(metrics, 'idem_node_catch_ups_total');
    const lag = metricByPartition(metrics, 'idem_node_catch_up_lag');
    const active = metricByPartition(metrics, 'idem_node_catch_up_active');
    const caughtUp = metricByPartition(metrics, 'idem_node_catch_up_records_total');
    for (const p of [0, 1, 2]) {
      // More than one when the head outran the node after a catch-up ended (it starts again at the threshold).
      assert.ok((started.get(p) ?? 0) >= 1, `partition ${p}: caught up`);
      assert.equal(lag.get(p), 0, `partition ${p}: zero lag`);
      assert.equal(active.get(p), 0, `partition ${p}: catch-up over`);
      assert.ok((caughtUp.get(p) ?? 0) >= 5_000, `partition ${p}: the backlog was handled catching up`);
    }
    assert.match(metrics, /idem_node_catch_up_rate\{topic="[^"]+",partition="0"\} \d/);
    assert.match(metrics, /idem_node_catch_up_eta_seconds\{topic="[^"]+",partition="0"\} /);
    // Larger store calls: the backlog went through in chunks of up to 2,000, not 200.
    const lookups = Number(
      /idem_node_store_operation_duration_seconds_count\{operation="lookup"\} (\d+)/.exec(metrics)?.[1],
    );
    // Ordinary chunks would take at least (backlog + head) / 200 = 270 lookups; the head alone, arriving in
    // requests of 500 per partition, takes at most about 110.
    const ordinary = (backlog + head) / batchSize;
    assert.ok(lookups < ordinary * 0.75, `${lookups} lookups for ${backlog + head} records`);

    // The perf log reported the progress, and the end of each catch-up.
    assert.ok(perfLines.length > 0, 'catch-up lines in the perf log');
    assert.match(String(perfLines.at(-1)?.msg), /^catch-up: partition \d/);
    const ended = second.logs.filter((l) => /catch-up caught up/.test(l.msg)).map((l) => l.partition);
    assert.deepEqual([...new Set(ended)].sort(), [0, 1, 2]);
  });
});

describe('CatchUp', () => {
  const silent = pino({ level: 'silent' });
  const tracker = (config = {}) =>
    new CatchUp(
      { enabled: true, lagThreshold: 1_000, batchSize: 500, ...config },
      100,
      new NodeMetrics(),
      silent,
    );

  it('starts at the lag threshold, uses large chunks until within one ordinary chunk of the head', () => {
    const c = tracker();
    assert.equal(c.chunkSize('t', 0, 0, 999), 100, 'below the threshold: ordinary chunks');
    assert.equal(c.chunkSize('t', 0, 0, 1_000), 500, 'at the threshold: catch-up chunks');
    c.handled('t', 0, 500, 500, 1_000);
    assert.equal(c.chunkSize('t', 0, 500, 1_000), 500, 'still 500 behind');
    c.handled('t', 0, 450, 950, 1_000);
    const [progress] = c.flush();
    assert.equal(progress?.active, false, 'within one ordinary chunk: over');
    assert.equal(progress?.lag, 50);
    assert.equal(c.chunkSize('t', 0, 950, 1_000), 100, 'ordinary chunks again');
  });

  it('reports the rate and a finite estimate while the backlog shrinks; a rebalance ends a catch-up', async () => {
    const c = tracker();
    c.chunkSize('t', 1, 0, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 20));
    c.handled('t', 1, 500, 500, 10_000);
    const [p] = c.flush();
    assert.equal(p?.active, true);
    assert.ok((p?.rate ?? 0) > 0);
    assert.ok(p?.etaSeconds !== null && (p?.etaSeconds ?? 0) > 0);
    assert.match(formatCatchUp([p as NonNullable<typeof p>]), /^catch-up: partition 1 lag 9500 at \d+\/s, ~/);
    c.reassigned();
    const [ended] = c.flush();
    assert.equal(ended?.active, false);
    assert.equal(c.flush().length, 0, 'reported once after it ended');
  });

  it('does nothing when disabled', () => {
    const c = tracker({ enabled: false });
    assert.equal(c.chunkSize('t', 0, 0, 1_000_000), 100);
    assert.equal(c.flush().length, 0);
  });

  it('is configured by [catchUp] (and IDEM__CATCH_UP__*), whose unknown keys are errors naming them', async () => {
    const minimal = [
      '[kafka]\nbrokers = ["127.0.0.1:9092"]',
      '[input]\ntopic = "in"',
      '[output]\ntopic = "out"',
      '[dlq]\ntopic = "dlq"',
      '[dedup]\nid = "uid"',
      '[repository]\npath = "/tmp/store"',
    ].join('\n');
    const defaults = await loadConfig(nodeConfigSchema, { text: minimal, env: {} });
    assert.deepEqual(defaults.catchUp, { ...catchUpDefaults });
    const env = { IDEM__CATCH_UP__LAG_THRESHOLD: '5000', IDEM__CATCH_UP__ENABLED: 'false' };
    const overridden = await loadConfig(nodeConfigSchema, { text: minimal, env });
    assert.deepEqual(overridden.catchUp, { ...catchUpDefaults, lagThreshold: 5_000, enabled: false });
    await assert.rejects(
      loadConfig(nodeConfigSchema, { text: `${minimal}\n[catchUp]\nbatchsize = 5`, env: {} }),
      (error: unknown) => error instanceof ConfigError && /catchUp\.batchsize/.test(error.message),
    );
  });
});
