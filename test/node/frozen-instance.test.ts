import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { endOffsets, testProducer, waitForCommitted } from '../helpers/kafka.js';
import {
  type DedupInput,
  type InputRecord,
  type LogLine,
  type NodeProcess,
  type NodeTestbed,
  nodeConfig,
  nodeTestbed,
  produceInput,
  readOutput,
  rocksdbRepository,
  startNodeProcess,
  writeNodeConfig,
} from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

/*
 * Two at-least-once instances of one group (RocksDB each, changelog on, input keyed by id), one frozen with SIGSTOP
 * past its session while the other takes its partitions over, then resumed. Run the file once per client
 * (IDEM_KAFKA_CLIENT=kafkajs, =platformatic). IDEM_NODE_FROZEN_RECORDS scales the input (default a few thousand).
 */

const RECORDS = Number(process.env.IDEM_NODE_FROZEN_RECORDS ?? 2_000);
const PARTITIONS = 2;

/** Records of the given ids (key = id, so every copy shares its original's partition), in phase order. */
class PhasedInput {
  readonly #partitions: InputRecord[][] = Array.from({ length: PARTITIONS }, () => []);
  readonly #bySeq = new Map<number, InputRecord>();
  #seq = 0;
  #uids = new Set<string>();

  /** Appends one phase: `uids` in order, each to partition `index % PARTITIONS` of its first appearance. */
  add(uids: readonly string[]): DedupInput {
    const phase: InputRecord[][] = Array.from({ length: PARTITIONS }, () => []);
    for (const uid of uids) {
      const partition = Number(uid.slice(uid.indexOf('-') + 1)) % PARTITIONS;
      const list = this.#partitions[partition] as InputRecord[];
      const kind = this.#uids.has(uid) ? 'later-batch' : 'original';
      const record: InputRecord = { seq: this.#seq++, uid, key: uid, partition, offset: list.length, kind };
      this.#uids.add(uid);
      list.push(record);
      phase[partition]?.push(record);
      this.#bySeq.set(record.seq, record);
    }
    return this.#input(phase);
  }

  /** Everything added so far. */
  all(): DedupInput {
    return this.#input(this.#partitions);
  }

  #input(partitions: InputRecord[][]): DedupInput {
    return { partitions, bySeq: this.#bySeq, distinct: this.#uids.size, total: this.#seq };
  }
}

const ids = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}-${i}`);

/** One instance's config file: at-least-once with the changelog, its own RocksDB store. */
async function instanceConfig(t: TestContext, bed: NodeTestbed, batchSize: number): Promise<string> {
  const { topic, groupId, output, dlq } = bed;
  return writeNodeConfig(
    t,
    nodeConfig({
      topic,
      groupId,
      output,
      dlq,
      repository: await rocksdbRepository(t),
      batchSize,
      perfInterval: '200ms',
      extra: { changelog: { enabled: true } },
    }),
  );
}

/** The first line matching `match` logged after the first `after` lines. */
function logAfter(node: NodeProcess, after: number, match: (l: LogLine) => boolean, timeoutMs = 60_000) {
  return node.waitForLog((l) => node.logs.indexOf(l) >= after && match(l), timeoutMs);
}

describe('an at-least-once instance frozen past its session, then resumed', {
  skip: skipUnlessEnabled('kafka'),
}, () => {
  it('restores the marks the other instance wrote meanwhile before it handles its partitions again (Z1)', {
    timeout: 180_000,
  }, async (t) => {
    const batchSize = 50;
    const bed = await nodeTestbed(t, { partitions: PARTITIONS });
    const { kafka, admin, topic, output, groupId } = bed;
    t.after(() => admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined));
    const producer = await testProducer(t, kafka);
    const input = new PhasedInput();
    const third = Math.max(100, Math.floor(RECORDS / 3));

    // A alone handles the first ids: its partitions are restored and in use.
    await produceInput(producer, topic, input.add(ids('a', third)));
    const a = startNodeProcess(t, await instanceConfig(t, bed, batchSize));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });

    // A freezes; B takes both partitions once A's session lapses, forwards the `b` ids and writes their marks to
    // the changelog, then leaves.
    a.child.kill('SIGSTOP');
    const b = startNodeProcess(t, await instanceConfig(t, bed, batchSize));
    await produceInput(producer, topic, input.add(ids('b', third)));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });
    assert.deepEqual(await b.stop('SIGTERM'), { code: 0, signal: null });

    // A resumes and rejoins after the gap, alone: it gets the same partitions back. Later copies of the `b` ids
    // must find B's marks (restored from the changelog), new `c` ids must all pass.
    const before = a.logs.length;
    a.child.kill('SIGCONT');
    await logAfter(a, before, (l) => l.msg === 'joined the group');
    const later = ids('b', third).flatMap((uid, i) => [uid, `c-${i}`]);
    await produceInput(producer, topic, input.add(later));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });
    assert.deepEqual(await a.stop('SIGTERM'), { code: 0, signal: null });

    const report = await readOutput(kafka, output, input.all());
    const restored = a.logs.filter((l) => /^restored \d+ ids/.test(l.msg)).map((l) => l.msg);
    t.diagnostic(
      `output ${report.records} records, ${report.leaked} copies forwarded again (of ${third} later copies); ` +
        `A: ${restored.join(' | ')}`,
    );
    assert.deepEqual(report.missing, [], 'no id lost');
    assert.equal(report.distinct, input.all().distinct);
    // Only the later copies of the `b` ids repeat an id; a rebalance may repeat one chunk, no more.
    assert.ok(
      report.leaked <= batchSize,
      `${report.leaked} later copies of ids B marked were forwarded again (bound: one chunk, ${batchSize})`,
    );
  });

  it('does not go on with the batch it held when frozen: the new owner had forwarded it (Z2)', {
    timeout: 180_000,
  }, async (t) => {
    // Small chunks, one fetched batch of a few thousand records per partition: A is frozen early in its batch.
    const batchSize = 10;
    const bed = await nodeTestbed(t, { partitions: PARTITIONS });
    const { kafka, admin, topic, output, groupId } = bed;
    t.after(() => admin.deleteTopics({ topics: [`${groupId}-${output}-changelog`] }).catch(() => undefined));
    const producer = await testProducer(t, kafka);
    const input = new PhasedInput();
    const data = input.add(ids('u', RECORDS * 2));
    await produceInput(producer, topic, data);

    const a = startNodeProcess(t, await instanceConfig(t, bed, batchSize));
    // A restores right before the first chunk of its first batch: frozen now, it holds that batch.
    await a.waitForLog((l) => /^restored \d+ ids/.test(l.msg), 90_000);
    a.child.kill('SIGSTOP');
    const b = startNodeProcess(t, await instanceConfig(t, bed, batchSize));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });
    // B has forwarded and committed everything: whatever the output gets from here on comes from A.
    const ends = await endOffsets(admin, output);
    const before = a.logs.length;
    a.child.kill('SIGCONT');
    await logAfter(a, before, (l) => l.msg === 'joined the group');
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
    assert.deepEqual(await a.stop('SIGTERM'), { code: 0, signal: null });
    assert.deepEqual(await b.stop('SIGTERM'), { code: 0, signal: null });

    const after = await endOffsets(admin, output);
    const resumed = [...after].reduce((sum, [p, end]) => sum + end - (ends.get(p) ?? 0), 0);
    const report = await readOutput(kafka, output, input.all());
    const revoked = a.logs.slice(before).filter((l) => l.msg === 'partition closed');
    t.diagnostic(
      `A forwarded ${resumed} records after it resumed; output ${report.records}, ${report.leaked} duplicates; ` +
        `A closed ${revoked.map((l) => `${l.partition} [${l.reason}]`).join(', ')}`,
    );
    assert.deepEqual(report.missing, [], 'no id lost');
    // The chunk in hand when frozen may still go out; nothing after it.
    assert.ok(
      resumed <= batchSize,
      `A forwarded ${resumed} records of its old batch (bound: one chunk, ${batchSize})`,
    );
  });
});
