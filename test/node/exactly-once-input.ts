/**
 * Input for the exactly-once node tests that run several instances: records keyed by their dedup id, so every
 * copy of an id lands in its original's partition (the co-partitioning that partition-local state needs).
 */
import type { TestContext } from 'node:test';
import type { Kafka, Producer } from 'kafkajs';
import { type ChangelogEntry, ChangelogReader, decodeChanges } from '../../src/kafka/changelog/index.js';
import { fromKafkajs } from '../../src/kafka/kafkajs/index.js';
import { testProducer } from '../helpers/kafka.js';
import {
  type CopyKind,
  type DedupInput,
  type InputRecord,
  nodeConfig,
  nodeTestbed,
  prng,
} from '../helpers/node.js';

/** `distinct` ids, about `duplicateShare` more records repeating them in their own partition (same or later chunk). */
export function keyedDedupInput(options: {
  records: number;
  duplicateShare: number;
  partitions: number;
  batchSize: number;
  seed?: number;
}): DedupInput {
  const random = prng(options.seed ?? 5);
  const P = options.partitions;
  const copies = Math.round(options.records * options.duplicateShare);
  const distinct = options.records - copies;
  const placed: { record: InputRecord; at: number }[][] = Array.from({ length: P }, () => []);
  const originals: { record: InputRecord; at: number }[] = [];
  let seq = 0;
  for (let i = 0; i < distinct; i++) {
    const uid = `u-${i}`;
    const record: InputRecord = { seq: seq++, uid, key: uid, partition: i % P, offset: -1, kind: 'original' };
    const entry = { record, at: Math.floor(i / P) };
    placed[i % P]?.push(entry);
    originals.push(entry);
  }
  const perPartition = distinct / P;
  for (let j = 0; j < copies; j++) {
    const kind: CopyKind = j % 2 === 0 ? 'same-batch' : 'later-batch';
    const original = originals[Math.floor(random() * originals.length)] as (typeof originals)[number];
    const o = original.record;
    const at =
      kind === 'same-batch'
        ? original.at + 0.5 + random() * 5
        : original.at + options.batchSize * 3 + random() * perPartition;
    placed[o.partition]?.push({ record: { ...o, seq: seq++, offset: -1, kind }, at });
  }
  const partitions = placed.map((list) => {
    list.sort((a, b) => a.at - b.at);
    return list.map((entry, offset) => {
      entry.record.offset = offset;
      return entry.record;
    });
  });
  const bySeq = new Map<number, InputRecord>();
  for (const list of partitions) for (const r of list) bySeq.set(r.seq, r);
  return { partitions, bySeq, distinct, total: seq };
}

/** Ids `u-<start>` … `u-<start + count - 1>`, keyed by id, sent to partition `i % partitions`, one record each. */
export async function produceIds(
  producer: Producer,
  topic: string,
  options: { start: number; count: number; partitions: number; tag: string },
): Promise<void> {
  const messages = [];
  for (let i = options.start; i < options.start + options.count; i++) {
    messages.push({
      key: `u-${i}`,
      value: JSON.stringify({ uid: `u-${i}`, tag: options.tag }),
      partition: i % options.partitions,
    });
  }
  for (let i = 0; i < messages.length; i += 5_000) {
    await producer.send({ topic, acks: -1, messages: messages.slice(i, i + 5_000) });
  }
}

/**
 * Every committed record of the topic up to its current end, as a read_committed reader sees it. (The shared
 * `consumeAll` waits for the record just below the end offset, which in a transactional topic is a commit marker
 * no reader is ever given.)
 */
export async function readCommitted(
  kafka: Kafka,
  topic: string,
): Promise<{ partition: number; record: ChangelogEntry }[]> {
  // The changelog's reader: read_committed, group-free, up to the end offsets captured at the start. It skips
  // records without a key, which the tests never produce. The check reads on kafkajs, whichever client the node ran.
  const reader = new ChangelogReader(fromKafkajs(kafka));
  try {
    const partitions = await reader.partitions(topic);
    const records: { partition: number; record: ChangelogEntry }[] = [];
    await reader.read({
      topic,
      from: new Map(partitions.map((p) => [p, 0])),
      onBatch: (partition, batch) => {
        for (const record of batch) records.push({ partition, record });
      },
    });
    return records;
  } finally {
    await reader.close();
  }
}

/**
 * {@link readCommitted} once it holds at least `count` records, read again for up to 30 s: EndTxn answers before
 * the commit markers reach the partitions, so the group's offsets may be visible before the output is.
 */
export async function readCommittedAtLeast(
  kafka: Kafka,
  topic: string,
  count: number,
): Promise<{ partition: number; record: ChangelogEntry }[]> {
  let records = await readCommitted(kafka, topic);
  for (const deadline = Date.now() + 30_000; records.length < count && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    records = await readCommitted(kafka, topic);
  }
  return records;
}

/**
 * The ids a changelog topic holds a live mark for, as a restore decodes its records (one per id, or packs of
 * many), once there are at least `count`, read again for up to 30 s (see {@link readCommittedAtLeast}).
 */
export async function changelogMarks(kafka: Kafka, topic: string, count: number): Promise<Set<string>> {
  const read = async () => {
    const marks = new Map<string, boolean>();
    for (const { partition, record } of await readCommitted(kafka, topic)) {
      for (const change of decodeChanges(topic, partition, [record], () => undefined)) {
        marks.set(change.key, change.record !== undefined);
      }
    }
    return new Set([...marks].filter(([, live]) => live).map(([key]) => key));
  };
  let marks = await read();
  for (const deadline = Date.now() + 30_000; marks.size < count && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    marks = await read();
  }
  return marks;
}

/** The uids in the topic (read_committed), with how many records each has. */
export async function uidCounts(kafka: Kafka, topic: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const { record } of await readCommitted(kafka, topic)) {
    const { uid } = JSON.parse(record.value?.toString() ?? '{}') as { uid: string };
    counts.set(uid, (counts.get(uid) ?? 0) + 1);
  }
  return counts;
}

/**
 * {@link uidCounts} once at least `distinct` uids are visible, read again for up to 30 s. A transaction's commit
 * markers reach the partition after EndTxn has answered; until then a read_committed reader's end (the last stable
 * offset) may lie before them, and it reads less or nothing.
 */
export async function committedUidCounts(
  kafka: Kafka,
  topic: string,
  distinct: number,
): Promise<Map<string, number>> {
  let counts = await uidCounts(kafka, topic);
  for (const deadline = Date.now() + 30_000; counts.size < distinct && Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    counts = await uidCounts(kafka, topic);
  }
  return counts;
}

/**
 * What the committed output holds against generated input: records, distinct uids, extra copies, missing uids.
 * A read_committed reader sees nothing past a transaction still open, and per-instance exactly-once leaves one
 * open when an instance is SIGKILLed and not restarted, until the broker's transaction timeout (30 s by
 * default) aborts it: a report that misses uids is read again until `settleMs` has passed.
 */
export async function committedReport(
  kafka: Kafka,
  topic: string,
  input: DedupInput,
  options: { settleMs?: number } = {},
): Promise<{ records: number; distinct: number; leaked: number; missing: string[] }> {
  // The broker looks for timed-out transactions every 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms).
  const deadline = Date.now() + (options.settleMs ?? 75_000);
  for (;;) {
    const report = await readReport(kafka, topic, input);
    if (report.missing.length === 0 || Date.now() >= deadline) return report;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
}

async function readReport(
  kafka: Kafka,
  topic: string,
  input: DedupInput,
): Promise<{ records: number; distinct: number; leaked: number; missing: string[] }> {
  const counts = await uidCounts(kafka, topic);
  let records = 0;
  for (const n of counts.values()) records += n;
  const missing: string[] = [];
  for (const list of input.partitions) {
    for (const r of list) if (r.kind === 'original' && !counts.has(r.uid)) missing.push(r.uid);
  }
  return { records, distinct: counts.size, leaked: records - counts.size, missing };
}

/**
 * A one-partition node testbed under exactly-once: its changelog topic's name (deleted after the test; the node
 * creates it unless the test does first), a producer, and the node's config over a given repository.
 */
export async function exactlyOnceChangelogTestbed(t: TestContext) {
  const bed = await nodeTestbed(t, { partitions: 1 });
  const { kafka, admin, topic, output, dlq, groupId } = bed;
  const changelog = `${groupId}-${output}-changelog`;
  t.after(() => admin.deleteTopics({ topics: [changelog] }).catch(() => undefined));
  const producer = await testProducer(t, kafka);
  const config = (repository: Record<string, unknown>) =>
    nodeConfig({ topic, groupId, output, dlq, repository, extra: { output: { guarantee: 'exactly-once' } } });
  return { ...bed, changelog, producer, config };
}
