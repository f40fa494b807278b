import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kafka, logLevel, Partitioners, type Producer, type Transaction } from 'kafkajs';
import { KafkajsProducer } from '../../src/kafka/kafkajs/index.js';
import { ChunkTransaction, TransactionOnlySink } from '../../src/node/exactly-once/transaction.js';
import { LoggedRepository } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { createTopicsAndWait, onCleanup, randomName, waitFor } from '../helpers/kafka.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { type PrivateBroker, startPrivateBroker } from './private-broker.js';

/**
 * A broker restart seen in CI stalled the exactly-once node for good: a chunk's commit failed while the broker was
 * down, kafkajs left that producer in COMMITTING (it never begins another transaction from there), and the chunk's
 * failure handler took the transaction for aborted, so every retry of the batch failed on the same producer.
 */
describe('exactly-once chunk whose commit fails', { skip: skipUnlessEnabled('kafka') }, () => {
  it('asks for a new producer (the old one cannot begin another transaction)', {
    timeout: 300_000,
  }, async (t) => {
    const broker = await startPrivateBroker(t);
    const kafka = new Kafka({
      clientId: 'idem-test',
      brokers: [...broker.brokers],
      logLevel: logLevel.NOTHING,
      // Enough for a new broker's group coordinator to load; a commit to a stopped broker fails in ~30 s.
      retry: { retries: 8, initialRetryTime: 100 },
    });
    const admin = kafka.admin();
    await admin.connect();
    onCleanup(t, () => admin.disconnect());
    const [input, output, changelog, dlq, groupId] = ['in', 'out', 'changelog', 'dlq', 'group'].map((p) =>
      randomName(`idem-commit-${p}`),
    ) as [string, string, string, string, string];
    await createTopicsAndWait(
      admin,
      [input, output, changelog, dlq].map((topic) => ({ topic, numPartitions: 1 })),
    );
    // The group's coordinator (and __consumer_offsets) exist before the transaction commits offsets to it, as
    // they do for a node that joined its group; kafkajs does not retry a TxnOffsetCommit that finds none.
    await waitFor(
      () =>
        admin
          .setOffsets({ groupId, topic: input, partitions: [{ partition: 0, offset: '0' }] })
          .then(() => true)
          .catch(() => false),
      { timeoutMs: 60_000, intervalMs: 500, what: 'the group coordinator' },
    );
    await admin.disconnect();

    const transactionalId = randomName('idem-commit-tx');
    const producer = kafka.producer({
      transactionalId,
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    onCleanup(t, () => producer.disconnect().catch(() => undefined));
    const store = new LoggedRepository(new MemoryRepository(), new TransactionOnlySink(0));
    onCleanup(t, () => store.close());
    const tx = new ChunkTransaction({
      // The commit is the real one, sent while the broker is down (the moment the CI run hit).
      producer: new KafkajsProducer(stopBeforeCommit(producer, broker), true),
      group: { groupMetadata: () => ({ groupId }) },
      inputTopic: input,
      partition: 0,
      changelogTopic: changelog,
      dlqTopic: dlq,
      store,
    });
    await tx.sender.send({ topic: output, messages: [{ value: 'forwarded', partition: 0 }] });
    let committing = false;
    await assert.rejects(
      tx.finish({ topic: input, partition: 0, letters: [], nextOffset: '1' }).finally(() => {
        committing = !broker.running;
      }),
    );
    assert.ok(committing, 'the chunk failed in its commit, not before');

    assert.equal(await tx.fail(), false, 'the failed commit is not taken for an abort');
    assert.equal(tx.needsNewProducer, true);
    await broker.start();
    // What the flag guards against: kafkajs will not begin another transaction on this producer.
    await assert.rejects(producer.transaction(), /state "COMMITTING"/);
    // A new producer on the same transactional id (what a partition reset starts) gets going again.
    const fresh = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1 });
    await fresh.connect();
    onCleanup(t, () => fresh.disconnect());
    const next = await fresh.transaction();
    await next.send({ topic: output, messages: [{ value: 'after the restart', partition: 0 }] });
    await next.commit();
  });
});

/** The producer, except that each transaction's commit first stops the broker. */
function stopBeforeCommit(producer: Producer, broker: PrivateBroker): Producer {
  return new Proxy(producer, {
    get(target, name, receiver) {
      if (name !== 'transaction') return Reflect.get(target, name, receiver);
      return async (): Promise<Transaction> => {
        const tx = await target.transaction();
        return {
          ...tx,
          commit: async () => {
            await broker.stop();
            await tx.commit();
          },
        };
      };
    },
  });
}
