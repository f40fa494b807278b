import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { KafkaClientName } from '../../../src/kafka/port/index.js';
import { waitFor } from '../../helpers/kafka.js';
import { committed, portTestbed, runRecording, sendValues } from './testbed.js';

const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);

/** Manual commits: the group's position is what a handler committed, and nothing else. */
export function commitTests(name: KafkaClientName): void {
  it('commit(nextOffset): a new member of the group starts exactly there', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 2 });
    const producer = await bed.producer();
    await sendValues(producer, topic, 0, values(10));
    await sendValues(producer, topic, 1, values(3));
    const groupId = await bed.groupId();
    const first = await bed.member(groupId, [topic]);
    let done = false;
    await first.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch) => {
        if (batch.partition !== 0 || done) return;
        // Partition 0 handled up to offset 3: the next record to read is 4. Partition 1: nothing committed.
        await batch.commit('4');
        done = true;
      },
    });
    await waitFor(() => done, { what: 'the commit of partition 0' });
    await first.disconnect();
    assert.deepEqual(Object.fromEntries(await committed(bed.admin, groupId, topic)), { 0: 4, 1: -1 });

    const seen = await runRecording(await bed.member(groupId, [topic]));
    await waitFor(() => seen.count() >= 6 + 3, { what: () => `the rest (seen ${seen.count()})` });
    assert.deepEqual(seen.offsets(0), [4, 5, 6, 7, 8, 9]);
    assert.deepEqual(seen.offsets(1), [0, 1, 2]);
  });

  it('nothing is committed unless the handler commits', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 2 });
    const producer = await bed.producer();
    await sendValues(producer, topic, 0, values(4));
    await sendValues(producer, topic, 1, values(4));
    const groupId = await bed.groupId();
    const first = await bed.member(groupId, [topic]);
    const seen = await runRecording(first, { commit: false });
    await waitFor(() => seen.count() >= 8, { what: 'every record' });
    await first.stop();
    await first.disconnect();
    assert.deepEqual(Object.fromEntries(await committed(bed.admin, groupId, topic)), { 0: -1, 1: -1 });
    // The next member reads it all again, from the beginning.
    const again = await runRecording(await bed.member(groupId, [topic]), { commit: false });
    await waitFor(() => again.count() >= 8, { what: 'every record again' });
    assert.deepEqual(again.offsets(0), [0, 1, 2, 3]);
    assert.deepEqual(again.offsets(1), [0, 1, 2, 3]);
  });

  it('a rejected batch is fetched again from the last commit', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    await sendValues(await bed.producer(), topic, 0, values(10));
    const groupId = await bed.groupId();
    const member = await bed.member(groupId, [topic]);
    const firsts: string[] = [];
    let failed = false;
    await member.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch) => {
        firsts.push(batch.messages[0]?.offset as string);
        if (!failed) {
          failed = true;
          await batch.commit('3');
          throw new Error('the handler failed after committing offset 3');
        }
        const last = batch.messages[batch.messages.length - 1];
        if (last) batch.resolveOffset(last.offset);
        await batch.commit(String(BigInt(batch.lastOffset()) + 1n));
      },
    });
    await waitFor(async () => (await committed(bed.admin, groupId, topic)).get(0) === 10, {
      what: () => `the group to commit the end (batches from ${firsts})`,
    });
    assert.deepEqual(firsts, ['0', '3']);
  });
}
