import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { KafkaClientName, PartitionReader } from '../../../src/kafka/port/index.js';
import { randomName, waitFor } from '../../helpers/kafka.js';
import { portTestbed, sendValues, text } from './testbed.js';

/** A record as the reader's caller keeps it. */
interface Read {
  readonly offset: number;
  readonly key: string | null;
  readonly value: string | null;
}

/**
 * Reads partition `partition` from `from` up to `end` (exclusive) as the changelog restore does: fetch, skip what
 * lies before the position (a fetch returns whole batches), move past each batch, fetch again. Small fetches, so
 * the read takes many rounds.
 */
async function readRange(
  reader: PartitionReader,
  topic: string,
  partition: number,
  from: number,
  end: number,
): Promise<{ records: Read[]; rounds: number }> {
  const records: Read[] = [];
  let next = from;
  let rounds = 0;
  while (next < end) {
    rounds++;
    const fetched = await reader.fetch({
      topic,
      partitions: [{ partition, offset: next }],
      maxWaitMs: 100,
      maxBytes: 1_024,
      maxBytesPerPartition: 256,
    });
    for (const f of fetched) {
      assert.equal(f.partition, partition);
      assert.equal(f.errorCode, 0);
      for (const batch of f.batches) {
        const last = batch.baseOffset + batch.lastOffsetDelta;
        if (last < next) continue;
        if (!batch.isControl) {
          for (const r of batch.records) {
            if (r.offset >= next && r.offset < end)
              records.push({ offset: r.offset, key: r.key, value: text(r.value) });
          }
        }
        next = last + 1;
      }
    }
    assert.ok(rounds < 1_000, 'the read makes no progress');
  }
  return { records, rounds };
}

const values = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

/** The partition reader the changelog restore runs on. */
export function readerTests(name: KafkaClientName): void {
  it('reads a range across many batches and fetches, every record once, in order', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 2 });
    const producer = await bed.producer();
    // Eight requests of five: eight record batches in partition 1; partition 0 stays empty.
    for (let round = 0; round < 8; round++) {
      await producer.send({
        topic,
        messages: values(`r${round}-`, 5).map((value, i) => ({ key: `k${i}`, value, partition: 1 })),
      });
    }
    const reader = bed.reader();
    assert.deepEqual(await reader.partitions(topic), [0, 1]);
    assert.deepEqual(Object.fromEntries(await reader.listOffsets(topic, [0, 1], 'earliest')), { 0: 0, 1: 0 });
    assert.deepEqual(Object.fromEntries(await reader.listOffsets(topic, [0, 1], 'latest')), { 0: 0, 1: 40 });
    // From the middle of a batch to the middle of another.
    const { records, rounds } = await readRange(reader, topic, 1, 13, 37);
    assert.deepEqual(
      records.map((r) => r.offset),
      Array.from({ length: 24 }, (_, i) => 13 + i),
    );
    assert.equal(records[0]?.value, 'r2-3');
    assert.equal(records[0]?.key, 'k3');
    assert.equal(records[records.length - 1]?.value, 'r7-1');
    assert.ok(rounds > 1, 'a small fetch returns part of the range');
    // Concurrent reads on one reader, as the restore of several partitions does.
    const [one, two] = await Promise.all([
      readRange(reader, topic, 1, 0, 40),
      readRange(reader, topic, 1, 20, 40),
    ]);
    assert.equal(one.records.length, 40);
    assert.equal(two.records.length, 20);
  });

  it('latest is the last stable offset; batches say which are transactional, aborted or control', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    const tp = await bed.producer({
      transactionalId: randomName('idem-port-txn'),
      transactionTimeoutMs: 30_000,
    });
    await sendValues(await bed.producer(), topic, 0, ['plain']);
    const reader = bed.reader();
    const open = await tp.transaction();
    await open.send({ topic, messages: [{ value: 'aborted', partition: 0 }] });
    // The open transaction holds the stable end at its first record.
    assert.equal((await reader.listOffsets(topic, [0], 'latest')).get(0), 1);
    await open.abort();
    const ok = await tp.transaction();
    await ok.send({ topic, messages: [{ value: 'committed', partition: 0 }] });
    await ok.commit();
    // plain 0, aborted 1, abort marker 2, committed 3, commit marker 4 (written just after the commit returns).
    await waitFor(async () => (await reader.listOffsets(topic, [0], 'latest')).get(0) === 5, {
      what: 'the stable end past the commit marker',
    });
    const [part] = await reader.fetch({
      topic,
      partitions: [{ partition: 0, offset: 0 }],
      maxWaitMs: 100,
      maxBytes: 1 << 20,
      maxBytesPerPartition: 1 << 20,
    });
    const batches = (part?.batches ?? []).map((b) => ({
      baseOffset: b.baseOffset,
      inTransaction: b.inTransaction,
      isControl: b.isControl,
      values: b.isControl ? [] : b.records.map((r) => text(r.value)),
    }));
    assert.deepEqual(batches, [
      { baseOffset: 0, inTransaction: false, isControl: false, values: ['plain'] },
      { baseOffset: 1, inTransaction: true, isControl: false, values: ['aborted'] },
      { baseOffset: 2, inTransaction: true, isControl: true, values: [] },
      { baseOffset: 3, inTransaction: true, isControl: false, values: ['committed'] },
      { baseOffset: 4, inTransaction: true, isControl: true, values: [] },
    ]);
    const producerId = part?.batches[1]?.producerId;
    assert.deepEqual(part?.abortedTransactions, [{ producerId, firstOffset: 1 }]);
  });

  it('reads a compacted topic across its segments: every surviving record once, the last value per key', async (t) => {
    const bed = await portTestbed(t, name);
    // Every request rolls a segment (segment.ms 1) and the cleaner takes any dirty segment at once.
    const topic = await bed.topic({
      partitions: 1,
      config: {
        'cleanup.policy': 'compact',
        'segment.ms': '1',
        'min.cleanable.dirty.ratio': '0.001',
        'min.compaction.lag.ms': '0',
        'delete.retention.ms': '0',
      },
    });
    const producer = await bed.producer();
    const rounds = 4;
    for (let round = 0; round < rounds; round++) {
      await producer.send({
        topic,
        messages: [0, 1, 2, 3].map((k) => ({ key: `k${k}`, value: `r${round}-k${k}`, partition: 0 })),
      });
    }
    // One more segment, so the last round's is no longer the active one.
    await producer.send({ topic, messages: [{ key: 'end', value: 'end', partition: 0 }] });
    const end = rounds * 4 + 1;
    const reader = bed.reader();
    assert.equal((await reader.listOffsets(topic, [0], 'latest')).get(0), end);
    // The log cleaner wakes every log.cleaner.backoff.ms (15 s by default).
    let read: Read[] = [];
    await waitFor(
      async () => {
        read = (await readRange(reader, topic, 0, 0, end)).records;
        return read.length < end;
      },
      { timeoutMs: 60_000, intervalMs: 500, what: `the cleaner to compact ${topic}` },
    );
    const offsets = read.map((r) => r.offset);
    assert.deepEqual(
      offsets,
      [...new Set(offsets)].sort((a, b) => a - b),
      'each record once, in offset order',
    );
    const last = new Map(read.map((r) => [r.key, r.value]));
    assert.deepEqual(Object.fromEntries(last), {
      k0: 'r3-k0',
      k1: 'r3-k1',
      k2: 'r3-k2',
      k3: 'r3-k3',
      end: 'end',
    });
    // A read that starts at an offset the cleaner removed starts at the next record that is left.
    const gap = [...Array(end).keys()].find((o) => !offsets.includes(o)) as number;
    const fromGap = (await readRange(reader, topic, 0, gap, end)).records;
    assert.deepEqual(
      fromGap.map((r) => r.offset),
      offsets.filter((o) => o > gap),
    );
  });
}
