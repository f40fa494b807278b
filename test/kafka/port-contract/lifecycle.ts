import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ConsumedBatch, KafkaClientName } from '../../../src/kafka/port/index.js';
import { onCleanup, waitFor } from '../../helpers/kafka.js';
import { type PortTestbed, portTestbed, recording, runRecording, Seen, sendValues } from './testbed.js';

/** A member whose handler holds its first batch until released; the test checks what waits for it. */
async function holdingMember(t: Parameters<typeof onCleanup>[0], bed: PortTestbed) {
  const topic = await bed.topic({ partitions: 1 });
  await sendValues(await bed.producer(), topic, 0, ['a', 'b']);
  const member = await bed.member(await bed.groupId(), [topic]);
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  onCleanup(t, release);
  let held: ConsumedBatch | undefined;
  let finished = false;
  await member.run({
    partitionsConsumedConcurrently: 1,
    eachBatch: async (batch) => {
      held ??= batch;
      await released;
      finished = true;
    },
  });
  await waitFor(() => held !== undefined, { what: 'the first batch' });
  return { member, batch: held as ConsumedBatch, release, finished: () => finished };
}

/** Waits until `ending` (a stop or a disconnect) reaches the batch, checks it waits for it, then lets it end. */
async function waitsForBatch(
  ending: Promise<void>,
  held: { batch: ConsumedBatch; release: () => void; finished: () => boolean },
): Promise<void> {
  let ended = false;
  void ending.then(() => {
    ended = true;
  });
  await waitFor(() => !held.batch.isRunning(), { what: 'isRunning() to turn false' });
  assert.equal(ended, false, 'it ended while the batch was still in the handler');
  held.release();
  await ending;
  assert.equal(held.finished(), true);
}

/** Pause and resume, stop and run again, disconnect. */
export function lifecycleTests(name: KafkaClientName): void {
  it('a paused partition is not fetched until resumed; the others go on', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 2 });
    const producer = await bed.producer();
    await sendValues(producer, topic, 0, ['a0']);
    await sendValues(producer, topic, 1, ['b0']);
    const member = await bed.member(await bed.groupId(), [topic]);
    const seen = new Seen();
    const record = recording(seen);
    await member.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch) => {
        await record(batch);
        // As the adapter does when a record must wait: pause the partition from its handler.
        if (batch.partition === 1) member.pause([{ topic, partitions: [1] }]);
      },
    });
    await waitFor(() => seen.values(0).length === 1 && seen.values(1).length === 1, { what: 'a0 and b0' });
    await sendValues(producer, topic, 1, ['b1']);
    // Partition 0 goes on, round after round, while partition 1's new record waits.
    for (const value of ['a1', 'a2', 'a3']) {
      await sendValues(producer, topic, 0, [value]);
      await waitFor(() => seen.values(0).includes(value), { what: value });
    }
    assert.deepEqual(seen.values(1), ['b0']);
    member.resume([{ topic, partitions: [1] }]);
    await waitFor(() => seen.values(1).length === 2, { what: 'b1 after resume' });
    assert.deepEqual(seen.values(1), ['b0', 'b1']);
  });

  it('after stop(), run() starts again from the group’s commits', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    const producer = await bed.producer();
    await sendValues(producer, topic, 0, ['a', 'b']);
    const groupId = await bed.groupId();
    const member = await bed.member(groupId, [topic]);
    const seen = await runRecording(member);
    await waitFor(() => seen.count() === 2, { what: 'a and b' });
    await member.stop();
    await sendValues(producer, topic, 0, ['c', 'd']);
    const after = await runRecording(member);
    await waitFor(() => after.count() === 2, { what: 'c and d after run() again' });
    assert.deepEqual(after.offsets(0), [2, 3]);
    assert.deepEqual(seen.offsets(0), [0, 1]);
  });

  it('stop() waits for the batch in hand (isRunning() turns false meanwhile)', async (t) => {
    const bed = await portTestbed(t, name);
    const held = await holdingMember(t, bed);
    await waitsForBatch(held.member.stop(), held);
  });

  it('disconnect() waits for the batch in hand', async (t) => {
    const bed = await portTestbed(t, name);
    const held = await holdingMember(t, bed);
    await waitsForBatch(held.member.disconnect(), held);
  });
}
