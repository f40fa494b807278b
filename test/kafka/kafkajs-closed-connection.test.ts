// @kafka-client-pinned: kafkajs only (the other client retries these reads itself, see list-offsets.ts)
/*
 * Also a ListOffsets answered NOT_LEADER_FOR_PARTITION (a broker restarting, stale leader metadata): kafkajs raises
 * it at once, and broker-restart-offsets met it under load. A single broker says it only while restarting, so the
 * test rewrites the error code of the real broker's answer to one request.
 *
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
const NOT_LEADER_FOR_PARTITION = 6;

const sorted = (offsets: Map<number, number>) => [...offsets].sort(([a], [b]) => a - b);

/**
 * Sets each partition's error code in a ListOffsets response (v1 and later: after the size and correlation id, the
 * throttle time from v2, then per topic its name and per partition id, error code, timestamp, offset).
 */
function answerWith(response: Buffer, version: number, code: number): void {
  let at = 8 + (version >= 2 ? 4 : 0);
  const topics = response.readInt32BE(at);
  at += 4;
  for (let t = 0; t < topics; t++) {
    at += 2 + response.readInt16BE(at);
    const partitions = response.readInt32BE(at);
    at += 4;
    for (let p = 0; p < partitions; p++, at += 22) response.writeInt16BE(code, at + 4);
  }
}

/**
 * A kafkajs client whose next ListOffsets request, once armed, meets a connection closing under it, or is
 * answered with an error code.
 */
function closingClient(t: TestContext): {
  client: KafkaClient;
  kafka: Kafka;
  closeNextListOffsets(): () => number;
  failNextListOffsets(code: number): () => number;
} {
  let armed = false;
  let closed = 0;
  let failWith: number | undefined;
  let failed = 0;
  const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket = connect({ host, port }, onConnect);
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    /** The request whose answer gets `failWith`: its correlation id and version. */
    let failing: { id: number; version: number; code: number } | undefined;
    // kafkajs writes each request whole: its size (int32), API key (int16), version (int16), correlation id.
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      const listOffsets =
        Buffer.isBuffer(chunk) && chunk.length > 12 && chunk.readInt16BE(4) === LIST_OFFSETS_API_KEY;
      if (armed && listOffsets) {
        armed = false;
        closed++;
        socket.end();
        return true;
      }
      if (failWith !== undefined && listOffsets) {
        const version = chunk.readInt16BE(6);
        assert.ok(version >= 1, `ListOffsets v${version}: the test rewrites v1 and later`);
        failing = { id: chunk.readInt32BE(8), version, code: failWith };
        failWith = undefined;
      }
      return write(chunk, ...rest);
    }) as Socket['write'];
    const emit = socket.emit.bind(socket) as (event: string | symbol, ...args: unknown[]) => boolean;
    // A small answer arrives in one chunk: its size (int32), then the request's correlation id.
    socket.emit = ((event: string | symbol, ...args: unknown[]) => {
      const chunk = args[0];
      if (event === 'data' && failing !== undefined && Buffer.isBuffer(chunk) && chunk.length >= 8) {
        if (chunk.readInt32BE(4) === failing.id && chunk.readInt32BE(0) === chunk.length - 4) {
          answerWith(chunk, failing.version, failing.code);
          failing = undefined;
          failed++;
        }
      }
      return emit(event, ...args);
    }) as Socket['emit'];
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
    failNextListOffsets: (code) => {
      failWith = code;
      const before = failed;
      return () => failed - before;
    },
  };
}

/** A two-partition topic holding 1 and 2 records, with an admin and a partition reader of {@link closingClient}. */
async function twoPartitionTopic(t: TestContext, prefix: string) {
  const closing = closingClient(t);
  const { client, kafka } = closing;
  const admin = client.admin();
  await admin.connect();
  onCleanup(t, () => admin.disconnect());
  const topic = randomName(prefix);
  await admin.createTopics([{ topic, numPartitions: 2 }]);
  onCleanup(t, () => admin.deleteTopics([topic]).catch(() => undefined));
  const producer = kafka.producer();
  await producer.connect();
  onCleanup(t, () => producer.disconnect());
  await producer.send({ topic, messages: [0, 1, 1].map((partition) => ({ value: 'v', partition })) });
  const reader = client.partitionReader();
  onCleanup(t, () => reader.close());
  return { ...closing, admin, reader, topic, partitions: await reader.partitions(topic) };
}

describe('kafkajs reads whose connection closes under them', { skip: skipUnlessEnabled('kafka') }, () => {
  it('the partition reader and the admin list offsets again and answer', async (t) => {
    const { closeNextListOffsets, admin, reader, topic, partitions } = await twoPartitionTopic(
      t,
      'idem-closed-connection',
    );
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

  it('the partition reader and the admin list offsets again after a NOT_LEADER_FOR_PARTITION answer', async (t) => {
    const { failNextListOffsets, admin, reader, topic, partitions } = await twoPartitionTopic(
      t,
      'idem-not-leader',
    );

    let failed = failNextListOffsets(NOT_LEADER_FOR_PARTITION);
    assert.deepEqual(sorted(await reader.listOffsets(topic, partitions, 'latest')), [
      [0, 1],
      [1, 2],
    ]);
    assert.equal(failed(), 1, 'the reader’s ListOffsets was answered NOT_LEADER_FOR_PARTITION');

    failed = failNextListOffsets(NOT_LEADER_FOR_PARTITION);
    assert.deepEqual(
      (await admin.topicOffsets(topic)).map((r) => [r.partition, r.low, r.high]),
      [
        [0, '0', '1'],
        [1, '0', '2'],
      ],
    );
    assert.equal(failed(), 1, 'the admin’s ListOffsets was answered NOT_LEADER_FOR_PARTITION');
  });
});
