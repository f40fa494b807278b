import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { GroupConsumer, KafkaClientName } from '../../../src/kafka/port/index.js';
import { randomName, waitFor } from '../../helpers/kafka.js';
import {
  committed,
  committedEventually,
  committedValues,
  joined,
  type PortTestbed,
  portTestbed,
  runRecording,
  sendValues,
} from './testbed.js';

async function transactional(bed: PortTestbed) {
  return bed.producer({ transactionalId: randomName('idem-port-txn'), transactionTimeoutMs: 30_000 });
}

/** A member of a new group over `input` that has joined (its generation is the one offsets are sent with). */
async function joinedMember(bed: PortTestbed, groupId: string, input: string): Promise<GroupConsumer> {
  const member = await bed.member(groupId, [input]);
  await joined(await runRecording(member, { commit: false }));
  return member;
}

/** Transactions: records and offsets together, all or nothing, and the fencing of zombies. */
export function transactionTests(name: KafkaClientName): void {
  it('commit makes records and offsets visible to read_committed readers; abort hides both', async (t) => {
    const bed = await portTestbed(t, name);
    const input = await bed.topic({ partitions: 1 });
    const output = await bed.topic({ partitions: 2 });
    const groupId = await bed.groupId();
    const member = await joinedMember(bed, groupId, input);
    const tp = await transactional(bed);

    const aborted = await tp.transaction();
    assert.equal(aborted.isActive(), true);
    await aborted.send({
      topic: output,
      messages: [
        { value: 'x0', partition: 0 },
        { value: 'x1', partition: 1 },
      ],
    });
    await aborted.sendOffsets({
      group: member,
      topics: [{ topic: input, partitions: [{ partition: 0, offset: '7' }] }],
    });
    await aborted.abort();
    assert.equal(aborted.isActive(), false);
    assert.deepEqual(Object.fromEntries(await committed(bed.admin, groupId, input)), { 0: -1 });

    const ok = await tp.transaction();
    const sent = await ok.send({
      topic: output,
      messages: [
        { value: 'c0', partition: 0 },
        { value: 'c1', partition: 1 },
      ],
    });
    assert.deepEqual(sent.map((r) => r.partition).sort(), [0, 1]);
    await ok.sendOffsets({
      group: member,
      topics: [{ topic: input, partitions: [{ partition: 0, offset: '3' }] }],
    });
    await ok.commit();
    assert.equal(ok.isActive(), false);
    const reader = bed.reader();
    assert.deepEqual(Object.fromEntries(await committedValues(reader, bed.admin, output)), {
      0: ['c0'],
      1: ['c1'],
    });
    await committedEventually(bed.admin, groupId, input, { 0: 3 });
  });

  it('offsets for a group this client does not consume with are committed by group id', async (t) => {
    const bed = await portTestbed(t, name);
    const input = await bed.topic({ partitions: 2 });
    const groupId = await bed.groupId();
    const tp = await transactional(bed);
    const tx = await tp.transaction();
    await tx.sendOffsets({
      group: { groupMetadata: () => ({ groupId }) },
      topics: [{ topic: input, partitions: [{ partition: 1, offset: '5' }] }],
    });
    await tx.commit();
    await committedEventually(bed.admin, groupId, input, { 0: -1, 1: 5 });
  });

  it('a second producer of the same transactional id fences the first: its commit fails as fenced', async (t) => {
    const bed = await portTestbed(t, name);
    const output = await bed.topic({ partitions: 1 });
    const id = randomName('idem-port-txn');
    const older = await bed.producer({ transactionalId: id, transactionTimeoutMs: 30_000 });
    const tx = await older.transaction();
    await tx.send({ topic: output, messages: [{ value: 'zombie', partition: 0 }] });
    const newer = await bed.producer({ transactionalId: id, transactionTimeoutMs: 30_000 });
    let failure: unknown;
    await tx.commit().catch((error: unknown) => {
      failure = error;
    });
    assert.ok(failure !== undefined, 'the fenced producer’s commit succeeded');
    assert.equal(bed.client.errors.isFenced(failure), true, `not classified fenced: ${String(failure)}`);
    assert.equal(tx.isActive(), false);
    // The newer producer works, and the zombie's record never became visible.
    const next = await newer.transaction();
    await next.send({ topic: output, messages: [{ value: 'owner', partition: 0 }] });
    await next.commit();
    assert.deepEqual((await committedValues(bed.reader(), bed.admin, output)).get(0), ['owner']);
  });

  it('offsets sent with a stale generation: refused as fenced when fencesByGroup, else accepted', async (t) => {
    const bed = await portTestbed(t, name);
    const input = await bed.topic({ partitions: 2 });
    const groupId = await bed.groupId();
    const first = await bed.member(groupId, [input]);
    const a = await runRecording(first, { commit: false });
    await joined(a);
    const stale = first.groupMetadata();
    // A second member joins: the group moves on; `stale` is what a zombie of the first generation still sends.
    const b = await runRecording(await bed.member(groupId, [input]), { commit: false });
    await waitFor(() => b.joins.length > 0 && a.joins.length > 1, { what: 'the rebalance' });
    const tp = await transactional(bed);
    const zombie = await tp.transaction();
    const offsets = {
      group: { groupMetadata: () => stale },
      topics: [{ topic: input, partitions: [{ partition: 0, offset: '1' }] }],
    };
    if (bed.client.capabilities.fencesByGroup) {
      await assert.rejects(zombie.sendOffsets(offsets), (error: unknown) =>
        bed.client.errors.isFenced(error),
      );
      await zombie.abort().catch(() => undefined);
      assert.equal((await committed(bed.admin, groupId, input)).get(0), -1);
    } else {
      // Only the group id is sent: the group cannot tell a zombie (a transactional id per partition fences it).
      await zombie.sendOffsets(offsets);
      await zombie.commit();
      assert.equal((await committedEventually(bed.admin, groupId, input, { 0: 1, 1: -1 })).get(0), 1);
    }
  });

  it('back-to-back transactions of offsets only: each commits (CONCURRENT_TRANSACTIONS is retried)', async (t) => {
    const bed = await portTestbed(t, name);
    const input = await bed.topic({ partitions: 1 });
    const groupId = await bed.groupId();
    const member = await joinedMember(bed, groupId, input);
    const tp = await transactional(bed);
    // Each one's first request is its offsets, sent while the coordinator may still write the last one's markers
    // (an exactly-once chunk of duplicates only). kafkajs did not retry that request: it rejected.
    for (let next = 1; next <= 10; next++) {
      const tx = await tp.transaction();
      await tx.sendOffsets({
        group: member,
        topics: [{ topic: input, partitions: [{ partition: 0, offset: String(next) }] }],
      });
      await tx.commit();
    }
    await committedEventually(bed.admin, groupId, input, { 0: 10 });
  });

  it('a batch rejected after its transaction committed offsets is fetched again from those offsets', async (t) => {
    const bed = await portTestbed(t, name);
    const input = await bed.topic({ partitions: 1 });
    await sendValues(
      await bed.producer(),
      input,
      0,
      Array.from({ length: 10 }, (_, i) => `v${i}`),
    );
    const groupId = await bed.groupId();
    // A client that reads the group's offsets again after a failure reads them stable: the commit's markers are
    // then down (kafkajs ignores the option).
    const member = await bed.member(groupId, [input], { requireStableOffsets: true });
    const tp = await transactional(bed);
    const firsts: string[] = [];
    let failed = false;
    await member.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch) => {
        firsts.push(batch.messages[0]?.offset as string);
        const next = failed ? String(BigInt(batch.lastOffset()) + 1n) : '3';
        const tx = await tp.transaction();
        await tx.sendOffsets({
          group: member,
          topics: [{ topic: input, partitions: [{ partition: 0, offset: next }] }],
        });
        await tx.commit();
        if (!failed) {
          failed = true;
          throw new Error('the handler failed after its transaction committed offset 3');
        }
        const last = batch.messages[batch.messages.length - 1];
        if (last) batch.resolveOffset(last.offset);
      },
    });
    await waitFor(async () => (await committed(bed.admin, groupId, input)).get(0) === 10, {
      what: () => `the group to commit the end (batches from ${firsts})`,
    });
    // From the batch's start (kafkajs did), the range the transaction committed was read again.
    assert.deepEqual(firsts, ['0', '3']);
  });
}
