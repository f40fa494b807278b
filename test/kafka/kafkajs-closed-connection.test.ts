// @kafka-client-pinned: kafkajs only (the other client retries these reads itself, see list-offsets.ts)
/*
 * A read whose connection closes under it (the broker stopping while the request is on its way) on the kafkajs
 * client: kafkajs rejects it at once with KafkaJSConnectionClosedError (its admin's offset call bails on it, the
 * cluster's ListOffsets has no retry at all), which broker-restart-offsets met under CI load. The port retries it
 * as it retries a read sent while the broker is away. Here the connection is closed under one ListOffsets request
 * on purpose: the client's socket swallows the request and closes its side, so the broker closes the connection
 * with the request unanswered.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { type ISocketFactory, Kafka, logLevel } from 'kafkajs';
import { fromKafkajs } from '../../src/kafka/kafkajs/index.js';
import type { KafkaClient } from '../../src/kafka/port/index.js';
import { onCleanup, randomName } from '../helpers/kafka.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const LIST_OFFSETS_API_KEY = 2;

const sorted = (offsets: Map<number, number>) => [...offsets].sort(([a], [b]) => a - b);

/** A kafkajs client whose next ListOffsets request, once armed, meets a connection closing under it. */
function closingClient(t: TestContext): {
  client: KafkaClient;
  kafka: Kafka;
  closeNextListOffsets(): () => number;
} {
  let armed = false;
  let closed = 0;
  const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket = connect({ host, port }, onConnect);
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    // kafkajs writes each request whole: its size (int32), then its API key (int16).
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (
        armed &&
        Buffer.isBuffer(chunk) &&
        chunk.length > 6 &&
        chunk.readInt16BE(4) === LIST_OFFSETS_API_KEY
      ) {
        armed = false;
        closed++;
        socket.end();
        return true;
      }
      return write(chunk, ...rest);
    }) as Socket['write'];
    return socket;
  };
  const kafka = new Kafka({
    clientId: 'idem-test-closed-connection',
    brokers: [...endpoints.kafkaBrokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5_000,
    retry: { retries: 5, initialRetryTime: 100 },
    socketFactory,
  });
  const client = fromKafkajs(kafka);
  onCleanup(t, () => client.close());
  return {
    client,
    kafka,
    closeNextListOffsets: () => {
      armed = true;
      const before = closed;
      return () => closed - before;
    },
  };
}

describe('kafkajs reads whose connection closes under them', { skip: skipUnlessEnabled('kafka') }, () => {
  it('the partition reader and the admin list offsets again and answer', async (t) => {
    const { client, kafka, closeNextListOffsets } = closingClient(t);
    const admin = client.admin();
    await admin.connect();
    onCleanup(t, () => admin.disconnect());
    const topic = randomName('idem-closed-connection');
    await admin.createTopics([{ topic, numPartitions: 2 }]);
    onCleanup(t, () => admin.deleteTopics([topic]).catch(() => undefined));
    const producer = kafka.producer();
    await producer.connect();
    onCleanup(t, () => producer.disconnect());
    await producer.send({ topic, messages: [0, 1, 1].map((partition) => ({ value: 'v', partition })) });
    const reader = client.partitionReader();
    onCleanup(t, () => reader.close());
    const partitions = await reader.partitions(topic);
    // Connections to the leader are open: the closed one is the one the request went out on.
    assert.deepEqual(sorted(await reader.listOffsets(topic, partitions, 'latest')), [
      [0, 1],
      [1, 2],
    ]);
    assert.deepEqual(
      (await admin.topicOffsets(topic)).map((r) => r.high),
      ['1', '2'],
    );

    let closed = closeNextListOffsets();
    assert.deepEqual(sorted(await reader.listOffsets(topic, partitions, 'latest')), [
      [0, 1],
      [1, 2],
    ]);
    assert.equal(closed(), 1, 'the reader’s ListOffsets met a closed connection');

    closed = closeNextListOffsets();
    assert.deepEqual(
      (await admin.topicOffsets(topic)).map((r) => [r.partition, r.low, r.high]),
      [
        [0, '0', '1'],
        [1, '0', '2'],
      ],
    );
    assert.equal(closed(), 1, 'the admin’s ListOffsets met a closed connection');
  });
});
