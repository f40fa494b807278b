import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { RepositoryClosedError } from '../../src/errors.js';
import type { KafkaProducer, KafkaTransaction } from '../../src/kafka/port/index.js';
import { ChunkTransaction, TransactionOnlySink } from '../../src/node/exactly-once/transaction.js';
import { LoggedRepository } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { onCleanup, randomName, testKafkaClientName } from '../helpers/kafka.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { committedValues, portTestbed } from '../kafka/port-contract/testbed.js';

const TTL = { ttlMs: 60_000 };

/**
 * The node's join listener closes a partition's logged store when the group may have moved it, while a chunk
 * transaction of that partition can still be committing. Its staged marks go with the store: a commit that then
 * reported success left them out of the local store, and the node moved the partition's restore offset past them
 * (later copies of those ids passed as new).
 */
describe('exactly-once chunk whose partition store is closed', { skip: skipUnlessEnabled('kafka') }, () => {
  it('before the commit: nothing commits, the transaction aborts', async (t) => {
    const bed = await setup(t, (producer) => producer);
    const { tx, store, inner } = bed;
    await bed.forward();
    await store.close();
    await assert.rejects(tx.commit(), RepositoryClosedError);
    assert.equal(tx.committed, undefined);
    assert.equal(await tx.fail(), true, 'aborted');
    assert.deepEqual(await bed.output(), [], 'no output without its marks');
    assert.deepEqual(await bed.changelog(), []);
    assert.equal(await inner.contains('id-1'), false);
  });

  it('while it commits: the commit rejects, committed, and the marks are not taken as applied', async (t) => {
    let store: LoggedRepository | undefined;
    // The close lands while EndTxn is on its way, as a join's can.
    const bed = await setup(t, (producer) =>
      withTransactions(producer, (tx) =>
        override(tx, {
          commit: async () => {
            const done = tx.commit();
            await store?.close();
            await done;
          },
        }),
      ),
    );
    store = bed.store;
    await bed.forward();
    await assert.rejects(bed.tx.commit(), RepositoryClosedError);
    assert.ok(bed.tx.committed, 'the Kafka transaction committed');
    assert.deepEqual(await bed.output(), ['forwarded']);
    assert.equal((await bed.changelog()).length, 1, 'its mark is in the changelog, for the restore');
    assert.equal(await bed.inner.contains('id-1'), false, 'and not in the local store');
  });
});

/** A chunk transaction over a memory store on the test broker; `wrap` may stand between it and its producer. */
async function setup(t: TestContext, wrap: (producer: KafkaProducer) => KafkaProducer) {
  const bed = await portTestbed(t, testKafkaClientName());
  const [input, output, changelog, dlq] = await Promise.all(
    ['in', 'out', 'changelog', 'dlq'].map(() => bed.topic({ partitions: 1 })),
  );
  const groupId = await bed.groupId();
  const producer = await bed.producer({
    transactionalId: randomName('idem-closed-store-tx'),
    transactionTimeoutMs: 30_000,
    idempotent: true,
  });
  const inner = new MemoryRepository();
  const store = new LoggedRepository(inner, new TransactionOnlySink(0), { closeInner: false });
  onCleanup(t, async () => {
    await store.close();
    await inner.close();
  });
  const tx = new ChunkTransaction({
    producer: wrap(producer),
    group: { groupMetadata: () => ({ groupId }) },
    inputTopic: input as string,
    partition: 0,
    outputTopic: output as string,
    changelogTopic: changelog as string,
    dlqTopic: dlq as string,
    store,
  });
  const reader = bed.reader();
  const values = async (topic: string) => (await committedValues(reader, bed.admin, topic)).get(0) ?? [];
  return {
    tx,
    store,
    inner,
    /** One chunk: its record forwarded and its id marked (staged), its end held open for the commit. */
    async forward() {
      tx.hold(true);
      await tx.sender.send({ topic: output as string, messages: [{ value: 'forwarded', partition: 0 }] });
      assert.deepEqual(await store.markMany([{ id: 'id-1' }], TTL), [true]);
      await tx.finish({ topic: input as string, partition: 0, letters: [], nextOffset: '1' });
    },
    output: () => values(output as string),
    changelog: () => values(changelog as string),
  };
}

/** `producer`, its transactions passed through `wrap`. */
function withTransactions(
  producer: KafkaProducer,
  wrap: (tx: KafkaTransaction) => KafkaTransaction,
): KafkaProducer {
  return override(producer, { transaction: async () => wrap(await producer.transaction()) });
}

/** `target` with some methods replaced; the others called on `target` itself (its private fields stay reachable). */
function override<T extends object>(target: T, methods: Partial<T>): T {
  return new Proxy(target, {
    get(object, name) {
      if (Object.hasOwn(methods, name)) return methods[name as keyof T];
      const value = Reflect.get(object, name, object);
      return typeof value === 'function' ? value.bind(object) : value;
    },
  });
}
