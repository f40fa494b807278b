import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { KafkaClientName } from '../../../src/kafka/port/index.js';
import { onCleanup, randomName, waitFor } from '../../helpers/kafka.js';
import { portTestbed, sendValues } from './testbed.js';

/** The admin calls of the port. */
export function adminTests(name: KafkaClientName): void {
  it('creates a topic once (with its configs), lists it, describes it, deletes it', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = randomName(`idem-port-${name}`);
    const spec = {
      topic,
      numPartitions: 3,
      configEntries: [
        { name: 'cleanup.policy', value: 'compact' },
        { name: 'retention.ms', value: '123456' },
      ],
    };
    assert.equal(await bed.admin.createTopics([spec]), true);
    let deleted = false;
    onCleanup(t, () => (deleted ? undefined : bed.admin.deleteTopics([topic]).catch(() => undefined)));
    assert.equal(await bed.admin.createTopics([spec]), false);
    assert.ok((await bed.admin.listTopics()).includes(topic));
    assert.deepEqual(await bed.admin.topicPartitions(topic), [0, 1, 2]);
    const configs = await bed.admin.describeTopicConfigs(topic, [
      'cleanup.policy',
      'retention.ms',
      'no.such.config',
    ]);
    assert.equal(configs.get('cleanup.policy'), 'compact');
    assert.equal(configs.get('retention.ms'), '123456');
    assert.equal(configs.has('no.such.config'), false);
    assert.deepEqual(
      await bed.admin.topicOffsets(topic),
      [0, 1, 2].map((partition) => ({ partition, low: '0', high: '0' })),
    );
    await bed.admin.deleteTopics([topic]);
    deleted = true;
    await waitFor(async () => !(await bed.admin.listTopics()).includes(topic), {
      what: `${topic} to be gone`,
    });
  });

  it('topicPartitions rejects for a missing topic and does not create it', async (t) => {
    const bed = await portTestbed(t, name);
    const missing = randomName(`idem-port-missing-${name}`);
    await assert.rejects(bed.admin.topicPartitions(missing));
    assert.equal((await bed.admin.listTopics()).includes(missing), false);
  });

  it('topicOffsets and deleteRecords: low and high watermarks per partition', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 3 });
    const producer = await bed.producer();
    await sendValues(producer, topic, 0, ['a', 'b', 'c']);
    await sendValues(producer, topic, 1, ['d', 'e']);
    await sendValues(producer, topic, 2, ['f']);
    assert.deepEqual(await bed.admin.topicOffsets(topic), [
      { partition: 0, low: '0', high: '3' },
      { partition: 1, low: '0', high: '2' },
      { partition: 2, low: '0', high: '1' },
    ]);
    await bed.admin.deleteRecords(topic, [1]);
    assert.deepEqual(await bed.admin.topicOffsets(topic), [
      { partition: 0, low: '0', high: '3' },
      { partition: 1, low: '2', high: '2' },
      { partition: 2, low: '0', high: '1' },
    ]);
    await bed.admin.deleteRecords(topic);
    assert.deepEqual(await bed.admin.topicOffsets(topic), [
      { partition: 0, low: '3', high: '3' },
      { partition: 1, low: '2', high: '2' },
      { partition: 2, low: '1', high: '1' },
    ]);
  });

  it('groupOffsets: -1 for every partition of a group that committed nothing', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 2 });
    assert.deepEqual(await bed.admin.groupOffsets(await bed.groupId(), topic), [
      { partition: 0, offset: '-1' },
      { partition: 1, offset: '-1' },
    ]);
  });
}
