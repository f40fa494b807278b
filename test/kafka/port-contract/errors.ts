import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { it } from 'node:test';
import {
  type KafkaClientName,
  type KafkaErrorClassifier,
  openKafkaClient,
} from '../../../src/kafka/port/index.js';
import { onCleanup, randomName, testConnection } from '../../helpers/kafka.js';
import { portTestbed, sendValues } from './testbed.js';

type ErrorClass = 'fenced' | 'record' | 'unreachable' | 'outOfRange' | 'permanent';

/** The classes the classifier puts `error` in. */
function classes(errors: KafkaErrorClassifier, error: unknown): ErrorClass[] {
  const found: ErrorClass[] = [];
  if (errors.isFenced(error)) found.push('fenced');
  if (errors.recordErrorType(error) !== undefined) found.push('record');
  if (errors.isBrokerUnreachable(error)) found.push('unreachable');
  if (errors.isOffsetOutOfRange(error)) found.push('outOfRange');
  if (errors.isPermanent(error)) found.push('permanent');
  return found;
}

/** A loopback port nothing listens on (taken, then freed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a rejection');
}

/** The error classifier, on the real errors of the real broker (fencing: see the transaction tests). */
export function errorTests(name: KafkaClientName): void {
  it('a record larger than the topic allows: recordErrorType MESSAGE_TOO_LARGE, permanent', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1, config: { 'max.message.bytes': '2048' } });
    const producer = await bed.producer();
    const error = await rejection(
      producer.send({ topic, messages: [{ value: 'x'.repeat(8_192), partition: 0 }] }),
    );
    assert.equal(bed.client.errors.recordErrorType(error), 'MESSAGE_TOO_LARGE');
    assert.deepEqual(classes(bed.client.errors, error), ['record', 'permanent']);
    // The producer still works for records that fit.
    await sendValues(producer, topic, 0, ['small']);
  });

  it('a fetch past the end, or before the log start: offset out of range, and only that', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    await sendValues(await bed.producer(), topic, 0, ['a', 'b', 'c']);
    const reader = bed.reader();
    const fetch = (offset: number) =>
      reader.fetch({
        topic,
        partitions: [{ partition: 0, offset }],
        maxWaitMs: 100,
        maxBytes: 1 << 20,
        maxBytesPerPartition: 1 << 20,
      });
    const past = await rejection(fetch(10));
    assert.equal(bed.client.errors.isOffsetOutOfRange(past), true);
    assert.equal(bed.client.errors.isFenced(past), false);
    assert.equal(bed.client.errors.isBrokerUnreachable(past), false);
    await bed.admin.deleteRecords(topic, [0]);
    assert.equal((await reader.listOffsets(topic, [0], 'earliest')).get(0), 3);
    const before = await rejection(fetch(0));
    assert.equal(bed.client.errors.isOffsetOutOfRange(before), true);
    // The reader goes on after the errors.
    assert.deepEqual(
      (await fetch(3)).map((p) => p.batches.length),
      [0],
    );
  });

  it('no broker listening: unreachable, never permanent', async (t) => {
    const port = await closedPort();
    const client = await openKafkaClient(
      {
        ...testConnection('idem-port-unreachable'),
        client: name,
        brokers: [`127.0.0.1:${port}`],
        connectionTimeout: 1_000,
      },
      { retries: 0 },
    );
    onCleanup(t, () => client.close());
    const admin = client.admin();
    const error = await rejection(admin.connect().then(() => admin.listTopics()));
    await admin.disconnect().catch(() => undefined);
    assert.deepEqual(classes(client.errors, error), ['unreachable']);
  });

  it('an unknown topic is none of fenced, record error, unreachable or out of range', async (t) => {
    const bed = await portTestbed(t, name);
    const error = await rejection(bed.admin.topicPartitions(randomName('idem-port-missing')));
    assert.deepEqual(
      classes(bed.client.errors, error).filter((c) => c !== 'permanent'),
      [],
    );
  });
}
