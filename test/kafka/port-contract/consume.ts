import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ConsumedBatch, KafkaAdmin, KafkaClientName } from '../../../src/kafka/port/index.js';
import { onCleanup, randomName, waitFor } from '../../helpers/kafka.js';
import { committed, portTestbed, runRecording, sendValues } from './testbed.js';

/** The attributes bit of a control batch (transaction markers). */
const CONTROL = 0x20;

const range = (prefix: string, from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => `${prefix}${from + i}`);

/** Waits until each named partition's high watermark is the given one (a transaction marker has landed). */
async function waitForEnd(admin: KafkaAdmin, topic: string, ends: Record<number, string>): Promise<void> {
  let high: Record<number, string> = {};
  await waitFor(
    async () => {
      high = Object.fromEntries((await admin.topicOffsets(topic)).map((o) => [o.partition, o.high]));
      return Object.entries(ends).every(([p, end]) => high[Number(p)] === end);
    },
    {
      what: () =>
        `the transaction markers of ${topic} (ends ${JSON.stringify(high)}, want ${JSON.stringify(ends)})`,
    },
  );
}

/** Consuming in batches: every record once, in offset order per partition, transaction markers left out. */
export function consumeTests(name: KafkaClientName): void {
  it('hands every record once, in offset order per partition, without control or aborted records', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 3 });
    const producer = await bed.producer();
    // Partition 0: plain records in three requests (three record batches).
    for (const from of [0, 5, 10]) await sendValues(producer, topic, 0, range('p', from, from + 5));
    // Partition 1: a committed transaction (4 records, then its marker), then plain records.
    // Partition 2: an aborted transaction (3 records, then its marker), then plain records.
    const tp = await bed.producer({
      transactionalId: randomName('idem-port-txn'),
      transactionTimeoutMs: 30_000,
    });
    const ok = await tp.transaction();
    await ok.send({ topic, messages: range('t', 0, 4).map((value) => ({ value, partition: 1 })) });
    await ok.commit();
    const aborted = await tp.transaction();
    await aborted.send({ topic, messages: range('x', 0, 3).map((value) => ({ value, partition: 2 })) });
    await aborted.abort();
    // The markers are written after commit() and abort() return: a plain record sent before its marker lands
    // would take the marker's offset (seen under load), so the plain records wait for both.
    await waitForEnd(bed.admin, topic, { 1: '5', 2: '4' });
    await sendValues(producer, topic, 1, ['q0', 'q1']);
    await sendValues(producer, topic, 2, ['r0', 'r1', 'r2']);
    const high = new Map((await bed.admin.topicOffsets(topic)).map((o) => [o.partition, o.high]));
    assert.deepEqual(Object.fromEntries(high), { 0: '15', 1: '7', 2: '7' });

    const groupId = await bed.groupId();
    const seen = await runRecording(await bed.member(groupId, [topic]), { concurrency: 3 });
    await waitFor(() => seen.count() >= 15 + 6 + 3, { what: () => `all records (seen ${seen.count()})` });
    // The group commits each batch's end (lastOffset() + 1): it reaches every partition's end.
    await waitFor(
      async () => [...(await committed(bed.admin, groupId, topic)).values()].join() === '15,7,7',
      {
        what: 'the commits of every batch end',
      },
    );

    assert.deepEqual(seen.values(0), range('p', 0, 15));
    assert.deepEqual(seen.offsets(0), [...Array(15).keys()]);
    assert.deepEqual(seen.values(1), [...range('t', 0, 4), 'q0', 'q1']);
    assert.deepEqual(seen.offsets(1), [0, 1, 2, 3, 5, 6]);
    assert.deepEqual(seen.values(2), ['r0', 'r1', 'r2']);
    assert.deepEqual(seen.offsets(2), [4, 5, 6]);
    for (const list of seen.messages.values()) {
      for (const m of list) assert.equal(m.attributes & CONTROL, 0, `offset ${m.offset} is a control record`);
    }
    for (const batch of seen.batches) {
      const last = batch.offsets[batch.offsets.length - 1];
      assert.ok(last !== undefined, 'no batch without records reaches the handler');
      assert.ok(BigInt(batch.lastOffset) >= BigInt(last), `lastOffset ${batch.lastOffset} < ${last}`);
      // Everything was written before the member started: the watermark is the partition's end.
      assert.equal(batch.highWatermark, high.get(batch.partition));
      assert.ok(BigInt(batch.lastOffset) < BigInt(batch.highWatermark));
    }
  });

  it('lastOffset() counts a trailing transaction marker, so committing lastOffset() + 1 passes it', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    const tp = await bed.producer({
      transactionalId: randomName('idem-port-txn'),
      transactionTimeoutMs: 30_000,
    });
    const tx = await tp.transaction();
    await tx.send({ topic, messages: range('t', 0, 3).map((value) => ({ value, partition: 0 })) });
    await tx.commit();
    // Offsets 0-2 the records, 3 the commit marker (written just after commit() returns): the end is 4.
    await waitForEnd(bed.admin, topic, { 0: '4' });
    const groupId = await bed.groupId();
    const seen = await runRecording(await bed.member(groupId, [topic]));
    await waitFor(() => seen.count() >= 3, { what: 'the transaction’s records' });
    const lastBatch = seen.batches[seen.batches.length - 1];
    if (lastBatch?.offsets.includes('2') && lastBatch.lastOffset === '3') {
      // The marker came in the records' fetch: the batch's end is past it.
      await waitFor(async () => (await committed(bed.admin, groupId, topic)).get(0) === 4, {
        what: 'the commit past the marker',
      });
    }
    // Fetched apart, the marker never reaches the handler: the member steps over it and reads on.
    await (await bed.producer()).send({ topic, messages: [{ value: 'after', partition: 0 }] });
    await waitFor(() => seen.count() >= 4, { what: 'the record after the marker' });
    assert.deepEqual(seen.offsets(0), [0, 1, 2, 4]);
  });

  it('resolveOffset() says where the next fetch of the partition starts', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    await sendValues(await bed.producer(), topic, 0, range('v', 0, 10));
    const member = await bed.member(await bed.groupId(), [topic]);
    const firsts: string[] = [];
    await member.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch: ConsumedBatch) => {
        firsts.push(batch.messages[0]?.offset as string);
        // Handle only the batch's first three records (no commit): the next fetch starts after them.
        const upTo = batch.messages[Math.min(2, batch.messages.length - 1)];
        if (upTo) batch.resolveOffset(upTo.offset);
      },
    });
    await waitFor(() => firsts.length >= 4, { what: () => `four batches (firsts ${firsts})` });
    assert.deepEqual(firsts.slice(0, 4), ['0', '3', '6', '9']);
    assert.ok(firsts.every((f, i) => i === 0 || BigInt(f) >= BigInt(firsts[i - 1] as string)));
  });

  it('partitionsConsumedConcurrently lets several partitions be in the handler at once', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 2 });
    const producer = await bed.producer();
    await sendValues(producer, topic, 0, ['a']);
    await sendValues(producer, topic, 1, ['b']);
    const member = await bed.member(await bed.groupId(), [topic]);
    const inHandler = new Set<number>();
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    await member.run({
      partitionsConsumedConcurrently: 2,
      eachBatch: async (batch) => {
        inHandler.add(batch.partition);
        await released;
      },
    });
    onCleanup(t, release);
    await waitFor(() => inHandler.size === 2, { what: 'both partitions in the handler at once' });
    release();
  });
}
