import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kafka } from 'kafkajs';
import { type KafkaRecord, runIdempotentConsumer } from '../../../src/adapters/kafka/index.js';
import { resolveKafkaAdapterOptions } from '../../../src/adapters/kafka/options.js';
import { IdempotentConsumer, type IdSelector } from '../../../src/consumer/index.js';
import { ConfigError } from '../../../src/errors.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import {
  endOffsets,
  kafkaTestbed,
  onCleanup,
  onTestClient,
  produce,
  testProducer,
  waitForCommitted,
} from '../../helpers/kafka.js';
import { skipUnlessEnabled } from '../../helpers/stores.js';

// What a user naturally writes for the wrapped consumer's id, instead of the exact kafkaRecordId reference.

const offline = new Kafka({ brokers: ['127.0.0.1:1'] }); // never connects: options are checked first

function consumer(id: IdSelector<KafkaRecord>): IdempotentConsumer<KafkaRecord> {
  return new IdempotentConsumer<KafkaRecord>({ repository: new MemoryRepository(), id });
}

function resolve(id: IdSelector<KafkaRecord>) {
  return resolveKafkaAdapterOptions({
    kafka: offline,
    topics: ['t'],
    groupId: 'g',
    idempotent: consumer(id),
    handler: () => undefined,
  });
}

const WHAT_TO_WRITE =
  "option idempotent.id of runIdempotentConsumer(...): must take the id the adapter read: build the IdempotentConsumer with `id: kafkaRecordId` or `id: (record) => record.id`; say where ids come from in the adapter's own `id` option: { from: 'key' } (the default), { from: 'value', path: 'meta.orderId' } or { from: 'header', name: 'event-id' }";

describe('the wrapped consumer’s id', () => {
  it('accepts (r) => r.id, ({ id }) => id and the path "id"', () => {
    for (const id of [(r: KafkaRecord) => r.id, ({ id }: KafkaRecord) => id, 'id'] as const) {
      assert.doesNotThrow(() => resolve(id as IdSelector<KafkaRecord>), String(id));
    }
  });

  it('refuses a selector that reads the kafkajs message itself, saying what to write instead', () => {
    for (const id of [
      (r: KafkaRecord) => r.message.key?.toString(),
      (r: KafkaRecord) => JSON.parse(String(r.message.value)).id as string,
      'message.key',
    ] as const) {
      assert.throws(
        () => resolve(id as IdSelector<KafkaRecord>),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.equal(error.key, 'idempotent.id');
          assert.equal(error.message, WHAT_TO_WRITE);
          return true;
        },
      );
    }
  });

  it('with id: (r) => r.id, each id is handled once against Kafka', {
    skip: skipUnlessEnabled('kafka'),
  }, async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t, { partitions: 1 });
    const keys = ['a', 'b', 'a', 'c', 'b', 'a'];
    await produce(
      await testProducer(t, kafka),
      topic,
      keys.map((key, i) => ({ key, value: String(i) })),
    );
    const handled: string[] = [];
    const idempotent = consumer((r) => r.id);
    const runner = await runIdempotentConsumer(
      onTestClient({
        kafka,
        topics: [topic],
        groupId,
        fromBeginning: true,
        idempotent,
        handler: (record: KafkaRecord) => {
          handled.push(`${record.id}@${record.message.value?.toString()}`);
        },
      }),
    );
    onCleanup(t, () => runner.stop());
    const committed = await waitForCommitted(admin, groupId, topic, { timeoutMs: 50_000 });
    assert.deepEqual(committed, await endOffsets(admin, topic));
    assert.deepEqual(handled, ['a@0', 'b@1', 'c@3']);
    assert.equal(idempotent.stats.duplicate, 3);
  });
});
