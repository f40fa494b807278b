import assert from 'node:assert/strict';
import { it } from 'node:test';
import { Partitioners } from 'kafkajs';
import type { KafkaClientName } from '../../../src/kafka/port/index.js';
import { consumeAll, testKafka } from '../../helpers/kafka.js';
import { portTestbed, text } from './testbed.js';

/** Where Java's default partitioner (murmur2) puts `key` among `count` partitions: kafkajs's DefaultPartitioner. */
function javaPartition(topic: string, key: string, count: number): number {
  const partitionMetadata = Array.from({ length: count }, (_, partitionId) => ({
    partitionId,
    leader: 1,
    partitionErrorCode: 0,
    replicas: [1],
    isr: [1],
  }));
  return Partitioners.DefaultPartitioner()({ topic, partitionMetadata, message: { key, value: null } });
}

/** Produce: records are read back (by an independent kafkajs reader) exactly as they were sent. */
export function produceTests(name: KafkaClientName): void {
  it('sends to the given partitions and answers each partition’s base offset', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 3 });
    const producer = await bed.producer();
    const first = await producer.send({
      topic,
      messages: [0, 1, 2].map((i) => ({ value: `a${i}`, partition: 0 })),
    });
    assert.deepEqual(first, [{ topic, partition: 0, baseOffset: '0' }]);
    const second = await producer.send({
      topic,
      messages: [
        { value: 'b0', partition: 2 },
        { value: 'a3', partition: 0 },
        { value: 'b1', partition: 2 },
      ],
    });
    assert.deepEqual(
      [...second].sort((a, b) => a.partition - b.partition),
      [
        { topic, partition: 0, baseOffset: '3' },
        { topic, partition: 2, baseOffset: '0' },
      ],
    );
    const records = await consumeAll(testKafka(), topic);
    assert.deepEqual(
      records.map((r) => [r.partition, r.offset, text(r.value)]),
      [
        [0, 0, 'a0'],
        [0, 1, 'a1'],
        [0, 2, 'a2'],
        [0, 3, 'a3'],
        [2, 0, 'b0'],
        [2, 1, 'b1'],
      ],
    );
  });

  it('keys, values, headers and timestamps round-trip (null key, tombstone, repeated header)', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    const producer = await bed.producer();
    const timestamp = String(Date.now() - 60_000);
    const binary = Buffer.from([0, 1, 2, 255]);
    await producer.send({
      topic,
      messages: [
        { key: 'text-key', value: 'text-value', partition: 0, timestamp, headers: { h: 'x', b: binary } },
        { key: binary, value: binary, partition: 0, headers: { two: ['a', Buffer.from('b')] } },
        { key: 'tombstone', value: null, partition: 0 },
        { key: null, value: 'no-key', partition: 0 },
      ],
    });
    const [a, b, c, d] = await consumeAll(testKafka(), topic);
    assert.equal(text(a?.key ?? null), 'text-key');
    assert.equal(text(a?.value ?? null), 'text-value');
    assert.equal(a?.timestamp, timestamp);
    assert.equal(text(a?.headers.h as Buffer), 'x');
    assert.deepEqual(a?.headers.b, binary);
    assert.deepEqual(b?.key, binary);
    assert.deepEqual(b?.value, binary);
    assert.deepEqual(
      ((b?.headers.two ?? []) as Buffer[]).map((v) => text(v)),
      ['a', 'b'],
    );
    assert.equal(text(c?.key ?? null), 'tombstone');
    assert.equal(c?.value, null);
    assert.equal(d?.key, null);
    assert.equal(text(d?.value ?? null), 'no-key');
  });

  it('places a keyed record without a partition where Java’s default partitioner does', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 3 });
    const producer = await bed.producer();
    for (const key of ['alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta']) {
      const [result] = await producer.send({ topic, messages: [{ key, value: key }] });
      assert.equal(result?.partition, javaPartition(topic, key, 3), `key ${key}`);
    }
  });

  it('acks -1 and 1 answer offsets; acks 0 answers none; every record is written', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    const plain = await bed.producer({ idempotent: false });
    assert.deepEqual(await plain.send({ topic, acks: -1, messages: [{ value: 'all', partition: 0 }] }), [
      { topic, partition: 0, baseOffset: '0' },
    ]);
    assert.deepEqual(await plain.send({ topic, acks: 1, messages: [{ value: 'leader', partition: 0 }] }), [
      { topic, partition: 0, baseOffset: '1' },
    ]);
    const none = await plain.send({ topic, acks: 0, messages: [{ value: 'none', partition: 0 }] });
    assert.ok(
      none.every((r) => r.baseOffset === undefined),
      `acks 0 answers no offset: ${JSON.stringify(none)}`,
    );
    // The acks-0 record was written all the same: a later acknowledged send comes after it.
    const [after] = await plain.send({ topic, acks: -1, messages: [{ value: 'after', partition: 0 }] });
    assert.equal(after?.baseOffset, '3');
    const records = await consumeAll(testKafka(), topic);
    assert.deepEqual(
      records.map((r) => text(r.value)),
      ['all', 'leader', 'none', 'after'],
    );
  });

  it('an idempotent producer writes concurrent sends once each, each send’s records in order', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    const producer = await bed.producer({ idempotent: true });
    const sends = Array.from({ length: 5 }, (_, s) =>
      producer.send({
        topic,
        messages: Array.from({ length: 4 }, (_, i) => ({ value: `${s}-${i}`, partition: 0 })),
      }),
    );
    const results = await Promise.all(sends);
    const records = await consumeAll(testKafka(), topic);
    assert.equal(records.length, 20);
    assert.equal(new Set(records.map((r) => text(r.value))).size, 20);
    results.forEach((result, s) => {
      const base = Number(result[0]?.baseOffset);
      assert.deepEqual(
        records.slice(base, base + 4).map((r) => text(r.value)),
        [0, 1, 2, 3].map((i) => `${s}-${i}`),
      );
    });
  });
}
