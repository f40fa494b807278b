import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { readDeadLetter } from '../../src/kafka/index.js';
import { ChunkTransaction, TransactionOnlySink } from '../../src/node/exactly-once/transaction.js';
import { OutputWriter } from '../../src/node/output.js';
import { LoggedRepository } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import {
  createTopicsAndWait,
  kafkaAdmin,
  onCleanup,
  produce,
  randomGroupId,
  randomName,
  testClient,
  testKafka,
  testProducer,
  waitForCommitted,
} from '../helpers/kafka.js';
import { nodeConfig, startNodeInProcess } from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedUidCounts, readCommittedAtLeast } from './exactly-once-input.js';

/**
 * A record the output topic refuses (larger than its max.message.bytes) is returned to the node, which
 * dead-letters it; the records around it must still be written and committed in the same transaction. On
 * @platformatic/kafka a request the broker refused inside a transaction left the library's sequence number for
 * the partition ahead: the next request failed with OUT_OF_ORDER_SEQUENCE_NUMBER, and so did every retry of the
 * chunk, so the partition stopped.
 */
describe('exactly-once output with a record the topic refuses', { skip: skipUnlessEnabled('kafka') }, () => {
  it('returns the refused record and commits the others once, in one transaction', {
    timeout: 120_000,
  }, async (t) => {
    const kafka = testKafka();
    const admin = await kafkaAdmin(t, kafka);
    const [input, output, changelog, dlq, groupId] = ['in', 'out', 'changelog', 'dlq', 'group'].map((p) =>
      randomName(`idem-refused-${p}`),
    ) as [string, string, string, string, string];
    const maxBytes = 2_000;
    await createTopicsAndWait(admin, [
      {
        topic: output,
        numPartitions: 1,
        configEntries: [{ name: 'max.message.bytes', value: String(maxBytes) }],
      },
      ...[input, changelog, dlq].map((topic) => ({ topic, numPartitions: 1 })),
    ]);
    onCleanup(t, () =>
      admin.deleteTopics({ topics: [input, output, changelog, dlq] }).catch(() => undefined),
    );

    const client = await testClient(t);
    const producer = client.producer({ transactionalId: randomName('idem-refused-tx'), idempotent: true });
    await producer.connect();
    onCleanup(t, () => producer.disconnect().catch(() => undefined));
    const store = new LoggedRepository(new MemoryRepository(), new TransactionOnlySink(0));
    onCleanup(t, () => store.close());
    const writer = new OutputWriter(producer, {
      topic: output,
      maxBatchBytes: maxBytes,
      refuseOverLimit: true,
      sendAttempts: 5,
      retryBackoffMs: 10,
      errors: client.errors,
    });
    const messages = Array.from({ length: 11 }, (_, i) => ({
      key: `u-${i}`,
      value: JSON.stringify({ uid: `u-${i}`, pad: i === 5 ? 'x'.repeat(4 * maxBytes) : '' }),
    }));
    const tx = new ChunkTransaction({
      producer,
      group: { groupMetadata: () => ({ groupId }) },
      inputTopic: input,
      outputTopic: output,
      partition: 0,
      changelogTopic: changelog,
      dlqTopic: dlq,
      store,
    });
    const refused = await writer.write(0, messages, tx.sender);
    assert.deepEqual(
      refused.map((r) => r.index),
      [5],
      'the record over the topic limit is refused, alone',
    );
    await tx.finish({ topic: input, partition: 0, letters: [], nextOffset: String(messages.length) });

    const counts = await committedUidCounts(kafka, output, messages.length - 1);
    assert.deepEqual(
      [...counts.keys()].sort(),
      messages
        .map((m) => m.key)
        .filter((k) => k !== 'u-5')
        .sort(),
    );
    assert.deepEqual(
      [...counts.values()].filter((n) => n !== 1),
      [],
      'each record committed once',
    );
  });

  it('the node dead-letters the record and commits the rest once; the partition goes on', {
    timeout: 120_000,
  }, async (t) => {
    const kafka = testKafka();
    const admin = await kafkaAdmin(t, kafka);
    const [topic, output, dlq] = ['in', 'out', 'dlq'].map((p) => randomName(`idem-refused-node-${p}`)) as [
      string,
      string,
      string,
    ];
    await createTopicsAndWait(admin, [
      { topic: output, numPartitions: 1, configEntries: [{ name: 'max.message.bytes', value: '20000' }] },
      ...[topic, dlq].map((name) => ({ topic: name, numPartitions: 1 })),
    ]);
    const groupId = randomGroupId(t, admin);
    const changelog = `${groupId}-${output}-changelog`;
    onCleanup(t, () =>
      admin.deleteTopics({ topics: [topic, output, dlq, changelog] }).catch(() => undefined),
    );
    const good = (i: number) => ({ key: `k${i}`, value: JSON.stringify({ uid: `g-${i}` }) });
    await produce(await testProducer(t, kafka), topic, [
      ...Array.from({ length: 100 }, (_, i) => good(i)),
      { key: 'big', value: JSON.stringify({ uid: 'too-big', pad: 'x'.repeat(30_000) }) },
      ...Array.from({ length: 100 }, (_, i) => good(100 + i)),
      good(5),
    ]);
    await startNodeInProcess(
      t,
      nodeConfig({
        topic,
        groupId,
        output,
        dlq,
        repository: { type: 'memory' },
        extra: { output: { guarantee: 'exactly-once' } },
      }),
    );
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });

    const counts = await committedUidCounts(kafka, output, 200);
    assert.deepEqual(
      [...counts.keys()].sort(),
      Array.from({ length: 200 }, (_, i) => `g-${i}`).sort(),
      'every good record, none of the refused',
    );
    assert.deepEqual(
      [...counts.values()].filter((n) => n !== 1),
      [],
      'each once',
    );
    const letters = (await readCommittedAtLeast(kafka, dlq, 1)).map(({ record }) => ({
      key: record.key,
      info: readDeadLetter(record.headers),
    }));
    assert.deepEqual(
      letters.map((l) => [l.key, l.info?.reason]),
      [['big', 'handler-failed']],
    );
    assert.match(letters[0]?.info?.error ?? '', /larger than the max message size/);
    assert.equal(letters[0]?.info?.offset, '100');
  });
});
