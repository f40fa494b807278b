import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { encodeMark } from '../../src/kafka/changelog/index.js';
import { KafkaRepository } from '../../src/repositories/kafka/index.js';
import {
  kafkaAdmin,
  randomName,
  testKafka,
  testKafkaClientName,
  testProducer,
  waitFor,
} from '../helpers/kafka.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const TTL = { ttlMs: 600_000 };

/** A fresh topic name, deleted after the test, and an opener of repositories on it, closed after the test. */
async function sharedTopic(t: TestContext, partitions = 3, topic = randomName('idem-repo')) {
  const admin = await kafkaAdmin(t, testKafka());
  t.after(() => admin.deleteTopics({ topics: [topic] }).catch(() => undefined));
  return async () => {
    const repo = await KafkaRepository.open({
      brokers: [...endpoints.kafkaBrokers],
      client: testKafkaClientName(),
      topic,
      partitions,
      replicationFactor: 1,
    });
    t.after(() => repo.close());
    return repo;
  };
}

describe('kafka repository across instances', { skip: skipUnlessEnabled('kafka') }, () => {
  it('a restarted consumer sees every mark written before it opened, as soon as open resolves (CAMEL-20218)', async (t) => {
    const open = await sharedTopic(t);
    const first = await open();
    const ids = Array.from({ length: 3_000 }, (_, i) => `order-${i}`);
    for (let i = 0; i < ids.length; i += 500) {
      await first.markMany(
        ids.slice(i, i + 500).map((id) => ({ id })),
        TTL,
      );
    }
    const claimed = 'claimed-last';
    await first.add(claimed, { ...TTL, leaseMs: 600_000, owner: 'worker-1' });
    // The first instance is still open (as a crashed one may still be): no close flushes anything.
    const restarted = await open();
    assert.deepEqual(
      await restarted.containsMany(ids),
      ids.map(() => true),
    );
    const record = await restarted.get(claimed);
    assert.equal(record?.state, 'in-flight');
    assert.equal(record?.owner, 'worker-1');
    assert.equal((await restarted.add(ids[2_999] as string, TTL)).added, false);
  });

  it('skips unreadable records of its topic with a counted warning; none becomes a mark', async (t) => {
    // Issue 17: one rule for the node's restore and this store. The damaged values of
    // test/node/changelog-bad-data.test.ts, written by another producer between two good marks.
    const nan = encodeMark({ expiresAt: Date.now() + 60_000 });
    nan.writeDoubleBE(Number.NaN, 1);
    const infinite = encodeMark({ expiresAt: Date.now() + 60_000 });
    infinite.writeDoubleBE(Number.POSITIVE_INFINITY, 1);
    const unknown = Buffer.alloc(9);
    unknown[0] = 9;
    const damaged = [Buffer.alloc(0), unknown, nan, infinite];
    const topic = randomName('idem-repo');
    const open = await sharedTopic(t, 1, topic);
    const writer = await open();
    await writer.markMany([{ id: 'good-before' }], TTL);
    const producer = await testProducer(t, testKafka());
    await producer.send({
      topic,
      acks: -1,
      messages: damaged.map((value, i) => ({ key: `bad-${i}`, value, partition: 0 })),
    });
    await writer.markMany([{ id: 'good-after' }], TTL);

    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    t.after(() => process.off('warning', onWarning));
    const reader = await open();
    assert.equal(reader.unreadableRecords, damaged.length, 'each damaged record counted once');
    assert.deepEqual(await reader.containsMany(['good-before', 'good-after']), [true, true]);
    const bad = damaged.map((_, i) => `bad-${i}`);
    assert.deepEqual(
      await reader.containsMany(bad),
      bad.map(() => false),
      'a damaged record became a mark',
    );
    // The instance that was open meanwhile follows the topic and skips them the same way.
    await waitFor(() => writer.unreadableRecords === damaged.length, {
      timeoutMs: 15_000,
      what: 'the open instance skips the damaged records',
    });
    assert.deepEqual(
      await writer.containsMany(bad),
      bad.map(() => false),
    );
    await new Promise((resolve) => setImmediate(resolve));
    const ours = warnings.filter((w) => w.includes(`unreadable records of topic ${topic}`));
    assert.ok(ours.length >= 1, `no warning named the topic: ${JSON.stringify(warnings)}`);
    assert.match(ours[0] as string, /partition 0, offset \d+: /);
  });

  it("sees another instance's marks, confirmations and removals eventually, in the order they were written", async (t) => {
    const open = await sharedTopic(t);
    const a = await open();
    const b = await open();
    await a.add('x', TTL);
    await waitFor(() => b.contains('x'), { timeoutMs: 15_000, what: 'b sees a mark of a' });
    await a.add('y', { ...TTL, leaseMs: 600_000, owner: 'a' });
    await waitFor(async () => (await b.get('y'))?.state === 'in-flight', {
      timeoutMs: 15_000,
      what: 'b sees the claim',
    });
    assert.equal(await a.confirm({ id: 'y', owner: 'a' }, { ttlMs: 600_000, result: 'done' }), true);
    await waitFor(async () => (await b.get('y'))?.result === 'done', {
      timeoutMs: 15_000,
      what: 'b sees the confirm',
    });
    assert.equal(await a.remove('x'), true);
    await waitFor(async () => !(await b.contains('x')), { timeoutMs: 15_000, what: 'b sees the removal' });
    // Its own writes read back never undo a later write of the same instance.
    await b.add('z', { ...TTL, leaseMs: 600_000, owner: 'b' });
    await b.confirm({ id: 'z', owner: 'b' }, TTL);
    await waitFor(async () => (await a.get('z'))?.state === 'confirmed', {
      timeoutMs: 15_000,
      what: 'a sees z',
    });
    assert.equal((await b.get('z'))?.state, 'confirmed');
    assert.equal(b.capabilities.shared, false);
  });
});
