import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Consumer, Kafka, Message, Producer } from 'kafkajs';
import {
  type IdempotentKafkaConsumer,
  type KafkaRecord,
  kafkaRecordId,
  type RunIdempotentConsumerOptions,
  readDeadLetter,
  runIdempotentConsumer,
} from '../../../src/adapters/kafka/index.js';
import { fingerprinter } from '../../../src/consumer/fingerprint.js';
import {
  type DuplicateRecord,
  type HandlerContext,
  IdempotentConsumer,
} from '../../../src/consumer/index.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import type { IdempotentRepository } from '../../../src/store/types.js';
import {
  committedOffsets,
  consumeAll,
  createTopic,
  endOffsets,
  headerText,
  kafkaTestbed,
  onCleanup,
  onTestClient,
  produce,
  testKafka,
  testProducer,
  waitFor,
  waitForCommitted,
} from '../../helpers/kafka.js';
import { skipUnlessEnabled } from '../../helpers/stores.js';

/** One successful handler call, in the order they happened. */
interface Handled {
  readonly id: string | undefined;
  readonly partition: number;
  readonly offset: number;
  readonly value: string;
}

function handledOf(record: KafkaRecord, context: HandlerContext): Handled {
  return {
    id: context.id,
    partition: record.partition,
    offset: Number(record.message.offset),
    value: record.message.value?.toString() ?? '',
  };
}

/** Runs the adapter and stops it after the test. */
async function start<R>(
  t: TestContext,
  options: RunIdempotentConsumerOptions<R>,
): Promise<IdempotentKafkaConsumer> {
  const runner = await runIdempotentConsumer(onTestClient({ fromBeginning: true, ...options }));
  onCleanup(t, () => runner.stop());
  return runner;
}

function consumerOf(repository: IdempotentRepository, extra: { nullId?: 'forward' | 'reject' } = {}) {
  return new IdempotentConsumer<KafkaRecord>({
    repository,
    id: kafkaRecordId,
    onWarning: () => {},
    ...extra,
  });
}

/** Asserts that within each partition the handled offsets only go up. */
function assertPartitionOrder(log: readonly Handled[]): void {
  const last = new Map<number, number>();
  for (const h of log) {
    const before = last.get(h.partition) ?? -1;
    assert.ok(h.offset > before, `partition ${h.partition}: offset ${h.offset} handled after ${before}`);
    last.set(h.partition, h.offset);
  }
}

const fast = { initialMs: 20, maxMs: 200 };

describe('runIdempotentConsumer against Kafka', { skip: skipUnlessEnabled('kafka') }, () => {
  /**
   * 5,000 records, 1,000 of them repeating an earlier id: half right after their original with the same key
   * (same partition, same batch), half at the end with another key (another partition or a later batch).
   */
  async function correctness(t: TestContext, repository: IdempotentRepository, concurrency: number) {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const unique = 4_000;
    const value = (i: number, copy: string) => JSON.stringify({ meta: { id: `id-${i}` }, copy });
    const messages: Message[] = [];
    const late: Message[] = [];
    for (let i = 0; i < unique; i++) {
      messages.push({ key: `k${i}`, value: value(i, 'first') });
      if (i % 4 === 0) {
        if (i % 8 === 0) messages.push({ key: `k${i}`, value: value(i, 'near') });
        else late.push({ key: `other-${i}`, value: value(i, 'late') });
      }
    }
    messages.push(...late);
    assert.equal(messages.length, 5_000);
    await produce(await testProducer(t, kafka), topic, messages);

    const idempotent = consumerOf(repository);
    const log: Handled[] = [];
    await start(t, {
      kafka,
      topics: [topic],
      groupId,
      id: { from: 'value', path: 'meta.id' },
      idempotent,
      batchSize: 200,
      partitionsConsumedConcurrently: concurrency,
      handler: (record, context) => {
        log.push(handledOf(record, context));
      },
    });
    const committed = await waitForCommitted(admin, groupId, topic, { timeoutMs: 50_000 });

    assert.equal(log.length, unique, 'one handler call per id');
    assert.equal(new Set(log.map((h) => h.id)).size, unique);
    assert.ok(
      log.every((h) => JSON.parse(h.value).copy !== 'near'),
      'a copy never runs before its original',
    );
    assert.equal(idempotent.stats.processed, unique);
    assert.equal(idempotent.stats.duplicate, 1_000);
    assertPartitionOrder(log);
    assert.deepEqual(committed, await endOffsets(admin, topic));
  }

  it('handles 5,000 records with 20% duplicates once each, in partition order (memory store)', async (t) => {
    await correctness(t, new MemoryRepository(), 1);
  });

  it('does the same with three partitions at once on the RocksDB store', async (t) => {
    const { RocksdbRepository } = await import('../../../src/repositories/rocksdb/index.js');
    const dir = await mkdtemp(join(tmpdir(), 'idem-kafka-rocksdb-'));
    const repository = await RocksdbRepository.open({ path: dir });
    onCleanup(t, async () => {
      await repository.close();
      await rm(dir, { recursive: true, force: true });
    });
    await correctness(t, repository, 3);
  });

  it('retries a failing record in place: later records of its partition wait for it', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    await produce(
      await testProducer(t, kafka),
      topic,
      Array.from({ length: 90 }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
    );
    const log: Handled[] = [];
    let failures = 0;
    const errors: string[] = [];
    const runner = await start(t, {
      kafka,
      topics: [topic],
      groupId,
      idempotent: consumerOf(new MemoryRepository()),
      retry: fast,
      handler: (record, context) => {
        if (context.id === 'k10' && failures < 2) {
          failures++;
          throw new Error(`transient ${failures}`);
        }
        log.push(handledOf(record, context));
      },
      onError: (error, info) => errors.push(`${(error as Error).message} @${info.offset} #${info.attempts}`),
    });
    await waitForCommitted(admin, groupId, topic);

    assert.equal(failures, 2);
    assert.equal(log.length, 90);
    assert.equal(new Set(log.map((h) => h.id)).size, 90);
    const at = log.findIndex((h) => h.id === 'k10');
    const failing = log[at] as Handled;
    const before = log.slice(0, at).filter((h) => h.partition === failing.partition);
    assert.ok(
      before.every((h) => h.offset < failing.offset),
      'no later record of the partition ran before the failing one succeeded',
    );
    assertPartitionOrder(log);
    assert.equal(runner.stats.retries, 2);
    assert.deepEqual(
      errors.map((e) => e.replace(/ @\d+/, '')),
      ['transient 1 #1', 'transient 2 #2'],
    );
  });

  it('dead-letters a record that always fails, with its headers, and commits past it only after the DLQ ack', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const dlqTopic = await createTopic(t, admin, { partitions: 1, prefix: 'idem-dlq' });
    await produce(
      await testProducer(t, kafka),
      topic,
      Array.from({ length: 60 }, (_, i) => ({ key: `k${i}`, value: `v${i}`, headers: { trace: `t${i}` } })),
    );

    // Own clients, to watch the order of DLQ acks and commits.
    const events: string[] = [];
    const realProducer = await testProducer(t, kafka);
    const producer: Producer = {
      ...realProducer,
      send: async (record) => {
        const result = await realProducer.send(record);
        events.push('dlq-ack');
        return result;
      },
    };
    const consumer: Consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
    onCleanup(t, () => consumer.disconnect());
    consumer.on(consumer.events.COMMIT_OFFSETS, ({ payload }) => {
      for (const { partitions } of payload.topics) {
        for (const p of partitions) events.push(`commit ${p.partition} ${p.offset}`);
      }
    });

    const log: Handled[] = [];
    let calls = 0;
    const runner = await start(t, {
      consumer,
      topics: [topic],
      idempotent: consumerOf(new MemoryRepository()),
      retry: { ...fast, maxAttempts: 3 },
      dlq: { topic: dlqTopic, producer },
      handler: (record, context) => {
        if (context.id === 'k7') {
          calls++;
          throw new Error('permanent failure');
        }
        log.push(handledOf(record, context));
      },
    });
    await waitForCommitted(admin, groupId, topic);

    assert.equal(calls, 3);
    assert.equal(log.length, 59);
    assert.ok(!log.some((h) => h.id === 'k7'));
    assert.equal(runner.stats.deadLettered, 1);
    const [letter, ...more] = await consumeAll(kafka, dlqTopic);
    assert.equal(more.length, 0);
    assert.ok(letter);
    assert.equal(letter.key?.toString(), 'k7');
    assert.equal(letter.value?.toString(), 'v7');
    assert.equal(headerText(letter.headers, 'trace'), 't7');
    const info = readDeadLetter(letter.headers);
    assert.ok(info);
    assert.equal(info.reason, 'handler-failed');
    assert.equal(info.error, 'permanent failure');
    assert.equal(info.topic, topic);
    assert.equal(info.attempts, 3);
    const source = (await consumeAll(kafka, topic)).find((r) => r.key?.toString() === 'k7');
    assert.equal(info.partition, source?.partition);
    assert.equal(info.offset, String(source?.offset));

    const ack = events.indexOf('dlq-ack');
    const pastIt = events.findIndex((e) => {
      const [, p, offset] = e.split(' ');
      return e.startsWith('commit') && Number(p) === info.partition && Number(offset) > Number(info.offset);
    });
    assert.ok(ack >= 0 && pastIt > ack, `commit past the record after the DLQ ack: ${events.join(', ')}`);
  });

  it('keeps a dead letter whose DLQ write failed uncommitted, and writes it once the DLQ takes it', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const dlqTopic = await createTopic(t, admin, { partitions: 1, prefix: 'idem-dlq' });
    // One key: one partition, the unreadable record at offset 2 between records the handler takes.
    const values = ['{"id":"a"}', '{"id":"b"}', '{not json', '{"id":"c"}', '{"id":"d"}'];
    await produce(
      await testProducer(t, kafka),
      topic,
      values.map((value) => ({ key: 'same', value })),
    );
    const events: string[] = [];
    const realProducer = await testProducer(t, kafka);
    const producer: Producer = {
      ...realProducer,
      send: async (record) => {
        if (!events.includes('dlq-refused')) {
          events.push('dlq-refused');
          throw new Error('the DLQ is down');
        }
        const result = await realProducer.send(record);
        events.push('dlq-ack');
        return result;
      },
    };
    const consumer: Consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
    onCleanup(t, () => consumer.disconnect());
    consumer.on(consumer.events.COMMIT_OFFSETS, ({ payload }) => {
      for (const { partitions } of payload.topics) {
        for (const p of partitions) events.push(`commit ${p.offset}`);
      }
    });
    const log: Handled[] = [];
    const runner = await start(t, {
      consumer,
      topics: [topic],
      id: { from: 'value', path: 'id' },
      idempotent: consumerOf(new MemoryRepository()),
      retry: fast,
      dlq: { topic: dlqTopic, producer },
      handler: (record, context) => {
        log.push(handledOf(record, context));
      },
    });
    await waitForCommitted(admin, groupId, topic);

    assert.deepEqual(
      log.map((h) => h.id),
      ['a', 'b', 'c', 'd'],
    );
    assert.equal(runner.stats.deadLettered, 1);
    const letters = await consumeAll(kafka, dlqTopic);
    assert.equal(letters.length, 1);
    assert.equal(readDeadLetter(letters[0]?.headers)?.offset, '2');
    const refused = events.indexOf('dlq-refused');
    const ack = events.indexOf('dlq-ack');
    const pastIt = events.findIndex((e) => e.startsWith('commit') && Number(e.split(' ')[1]) > 2);
    assert.ok(refused >= 0 && ack > refused, events.join(', '));
    assert.ok(pastIt > ack, `commit past the letter only after its DLQ ack: ${events.join(', ')}`);
  });

  it("dead-letters a value that is not JSON and, under nullId: 'forward', forwards a record without id field", async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const dlqTopic = await createTopic(t, admin, { partitions: 1, prefix: 'idem-dlq' });
    const values = [
      '{"id":"a"}',
      '{"id":"b"}',
      '{not json',
      '{"id":"a"}',
      '{"other":1}',
      '{"other":1}',
      '{"id":"c"}',
    ];
    // One key: every record in one partition, so their order is known.
    await produce(
      await testProducer(t, kafka),
      topic,
      values.map((value) => ({ key: 'same', value })),
    );
    const log: Handled[] = [];
    const idempotent = consumerOf(new MemoryRepository(), { nullId: 'forward' });
    await start(t, {
      kafka,
      topics: [topic],
      groupId,
      id: { from: 'value', path: 'id' },
      idempotent,
      dlq: { topic: dlqTopic },
      handler: (record, context) => {
        log.push(handledOf(record, context));
      },
    });
    await waitForCommitted(admin, groupId, topic);

    assert.deepEqual(
      log.map((h) => [h.offset, h.id]),
      [
        [0, 'a'],
        [1, 'b'],
        [4, undefined],
        [5, undefined],
        [6, 'c'],
      ],
    );
    assert.equal(idempotent.stats.noId, 2);
    const letters = await consumeAll(kafka, dlqTopic);
    assert.equal(letters.length, 1);
    assert.equal(letters[0]?.value?.toString(), '{not json');
    const info = readDeadLetter(letters[0]?.headers);
    assert.equal(info?.reason, 'invalid-json');
    assert.match(info?.error ?? '', /not valid JSON/);
    assert.equal(info?.offset, '2');
    assert.equal(info?.attempts, 0);
  });

  it('dead-letters a record without id by default (nullId: reject, as Camel)', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const dlqTopic = await createTopic(t, admin, { partitions: 1, prefix: 'idem-dlq' });
    await produce(await testProducer(t, kafka), topic, [
      { key: 'same', value: '{"id":"a"}' },
      { key: 'same', value: '{"other":1}' },
      { key: 'same', value: '{"id":"b"}' },
    ]);
    const log: Handled[] = [];
    await start(t, {
      kafka,
      topics: [topic],
      groupId,
      id: { from: 'value', path: 'id' },
      idempotent: consumerOf(new MemoryRepository()),
      dlq: { topic: dlqTopic },
      handler: (record, context) => {
        log.push(handledOf(record, context));
      },
    });
    await waitForCommitted(admin, groupId, topic);
    assert.deepEqual(
      log.map((h) => h.id),
      ['a', 'b'],
    );
    const letters = await consumeAll(kafka, dlqTopic);
    assert.equal(letters.length, 1);
    assert.equal(readDeadLetter(letters[0]?.headers)?.reason, 'no-id');
    assert.equal(letters[0]?.value?.toString(), '{"other":1}');
  });

  it('takes the id from a header', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    await produce(await testProducer(t, kafka), topic, [
      { key: 'same', value: '1', headers: { 'event-id': 'e1' } },
      { key: 'same', value: '2', headers: { 'event-id': 'e2' } },
      { key: 'same', value: '3', headers: { 'event-id': 'e1' } },
      { key: 'same', value: '4' },
    ]);
    const log: Handled[] = [];
    await start(t, {
      kafka,
      topics: [topic],
      groupId,
      id: { from: 'header', name: 'event-id' },
      idempotent: consumerOf(new MemoryRepository(), { nullId: 'forward' }),
      handler: (record, context) => {
        log.push(handledOf(record, context));
      },
    });
    await waitForCommitted(admin, groupId, topic);
    assert.deepEqual(log.map((h) => `${h.id}:${h.value}`).sort(), ['e1:1', 'e2:2', 'undefined:4']);
  });

  it('a handler that rewrites the id header, key and value completes the id it was read for', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const producer = await testProducer(t, kafka);
    const originals: Message[] = [
      { key: 'k1', value: '{"amount":1}', headers: { 'event-id': 'e1' } },
      { key: 'k2', value: '{"amount":2}', headers: { 'event-id': 'e2' } },
    ];
    await produce(producer, topic, originals);
    const repository = new MemoryRepository();
    const fingerprint = (record: KafkaRecord) => record.message.value ?? '';
    const idempotent = new IdempotentConsumer<KafkaRecord>({
      repository,
      id: kafkaRecordId,
      storeResult: true,
      fingerprint,
    });
    const log: Handled[] = [];
    await start(t, {
      kafka,
      topics: [topic],
      groupId,
      id: { from: 'header', name: 'event-id' },
      idempotent,
      handler: (record, context) => {
        log.push(handledOf(record, context));
        // Everything the id and the fingerprint were read from, rewritten in place.
        const message = record.message as { -readonly [K in keyof typeof record.message]: unknown };
        (message.headers as Record<string, unknown>)['event-id'] = Buffer.from('rewritten');
        message.key = Buffer.from('rewritten-key');
        message.value = Buffer.from('{"amount":-1}');
        (record as { id: string | undefined }).id = 'rewritten';
        return `charged ${context.id}`;
      },
    });
    await waitForCommitted(admin, groupId, topic);
    // The same records again, as a producer's retry sends them: duplicates of what was claimed, not conflicts.
    await produce(producer, topic, originals);
    await waitForCommitted(admin, groupId, topic);
    assert.deepEqual(log.map((h) => `${h.id}:${h.value}`).sort(), ['e1:{"amount":1}', 'e2:{"amount":2}']);
    assert.equal(idempotent.stats.processed, 2);
    assert.equal(idempotent.stats.duplicate, 2);
    assert.equal(idempotent.stats.conflicts, 0);
    for (const [i, id] of ['e1', 'e2'].entries()) {
      const record = await repository.get(id);
      assert.equal(record?.state, 'confirmed', `${id} was not completed`);
      const value = Buffer.from((originals[i] as Message).value as string);
      assert.equal(record.fingerprint, fingerprinter(fingerprint)({ message: { value } } as KafkaRecord));
    }
    assert.equal(await repository.contains('rewritten'), false, 'the rewritten id was stored');
  });

  it("names each duplicate's topic, partition and offset in onDuplicate's audit record", async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    await produce(await testProducer(t, kafka), topic, [
      { key: 'same', value: '1', headers: { 'event-id': 'e1' } },
      { key: 'same', value: '2', headers: { 'event-id': 'e2' } },
      { key: 'same', value: '3', headers: { 'event-id': 'e1' } },
    ]);
    const audited: DuplicateRecord[] = [];
    const idempotent = new IdempotentConsumer<KafkaRecord>({
      repository: new MemoryRepository(),
      id: kafkaRecordId,
      onDuplicate: (_record, _context, duplicate) => {
        audited.push(duplicate);
      },
    });
    await start(t, {
      kafka,
      topics: [topic],
      groupId,
      id: { from: 'header', name: 'event-id' },
      idempotent,
      handler: () => {},
    });
    await waitForCommitted(admin, groupId, topic);
    assert.equal(audited.length, 1);
    const [duplicate] = audited as [DuplicateRecord];
    assert.equal(duplicate.id, 'e1');
    const partition = duplicate.place?.partition;
    assert.equal(typeof partition, 'number');
    assert.deepEqual(duplicate.place, { topic, partition, offset: '2' });
    if (duplicate.reason === 'batch') {
      assert.deepEqual(duplicate.firstPlace, { topic, partition, offset: '0' });
    } else {
      assert.equal(duplicate.reason, 'stored', 'the copies came in two fetches');
    }
  });

  it('waits at a record another worker holds, and does not rerun the records it ran past it', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const values = Array.from({ length: 10 }, (_, i) => (i === 6 ? '{}' : JSON.stringify({ id: `r${i}` })));
    await produce(
      await testProducer(t, kafka),
      topic,
      values.map((value) => ({ key: 'same', value })),
    );
    const repository = new MemoryRepository();
    const ttlMs = 60_000;
    await repository.add('r5', { ttlMs, leaseMs: ttlMs, owner: 'other-worker' });
    const log: Handled[] = [];
    // r6 has no id and is forwarded, so the partition's only wait is r5's.
    const idempotent = consumerOf(repository, { nullId: 'forward' });
    const kinds: string[] = [];
    await start(t, {
      kafka,
      topics: [topic],
      groupId,
      id: { from: 'value', path: 'id' },
      idempotent,
      retry: fast,
      handler: (record, context) => {
        log.push(handledOf(record, context));
      },
      onError: (_error, info) => kinds.push(info.kind),
    });
    await waitFor(() => kinds.includes('in-progress'), { what: 'the partition to wait at r5' });
    assert.ok(
      ![...(await committedOffsets(admin, groupId, topic)).values()].some((o) => o > 5),
      'not committed past r5',
    );
    await repository.confirm({ id: 'r5', owner: 'other-worker' }, { ttlMs });
    await waitForCommitted(admin, groupId, topic);

    assert.deepEqual(
      log.map((h) => h.id ?? '-'),
      ['r0', 'r1', 'r2', 'r3', 'r4', '-', 'r7', 'r8', 'r9'],
      "r5 was the other worker's; nothing ran twice",
    );
    assert.equal(idempotent.stats.duplicate, 1);
  });

  it('commits nothing that was not handled when stopped mid-batch; a restart finishes each id once', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const total = 600;
    await produce(
      await testProducer(t, kafka),
      topic,
      Array.from({ length: total }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
    );
    const repository = new MemoryRepository();
    const log: Handled[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let blocked = false;
    const first = await start(t, {
      kafka,
      topics: [topic],
      groupId,
      idempotent: consumerOf(repository),
      batchSize: 50,
      handler: async (record, context) => {
        if (log.length === 120 && !blocked) {
          blocked = true;
          await gate;
        }
        log.push(handledOf(record, context));
      },
    });
    await waitFor(() => blocked, { what: 'the handler to block' });
    const stopping = first.stop();
    release();
    await stopping;

    const handledAt = new Map<number, Set<number>>();
    for (const h of log) {
      const set = handledAt.get(h.partition) ?? new Set();
      set.add(h.offset);
      handledAt.set(h.partition, set);
    }
    const committed = await committedOffsets(admin, groupId, topic);
    const ends = await endOffsets(admin, topic);
    let unfinished = 0;
    for (const [partition, end] of ends) {
      const upTo = committed.get(partition) ?? -1;
      if (upTo < end) unfinished++;
      for (let offset = 0; offset < upTo; offset++) {
        assert.ok(
          handledAt.get(partition)?.has(offset),
          `committed ${partition}@${offset} was never handled`,
        );
      }
    }
    assert.ok(unfinished > 0, 'the stop came before the end');
    assert.ok(log.length < total);

    await start(t, {
      kafka,
      topics: [topic],
      groupId,
      idempotent: consumerOf(repository),
      handler: (record, context) => {
        log.push(handledOf(record, context));
      },
    });
    await waitForCommitted(admin, groupId, topic);
    assert.equal(log.length, total, 'each id handled exactly once across the stop');
    assert.equal(new Set(log.map((h) => h.id)).size, total);
    assertPartitionOrder(log);
  });

  it('never commits past what a killed process handled (SIGKILL mid-batch)', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const total = 3_000;
    await produce(
      await testProducer(t, kafka),
      topic,
      Array.from({ length: total }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
    );
    const dir = await mkdtemp(join(tmpdir(), 'idem-kafka-crash-'));
    onCleanup(t, () => rm(dir, { recursive: true, force: true }));
    const logFile = join(dir, 'handled.log');
    const lines = () =>
      readFile(logFile, 'utf8').then(
        (text) => text.split('\n').filter(Boolean),
        () => [],
      );
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        fileURLToPath(new URL('fixtures/crash-child.ts', import.meta.url)),
        topic,
        groupId,
        logFile,
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    const exited = new Promise((resolve) => child.once('exit', resolve));
    onCleanup(t, async () => {
      child.kill('SIGKILL');
      await exited;
    });
    // Kill it once it has committed something and is mid-way.
    await waitFor(
      async () =>
        [...(await committedOffsets(admin, groupId, topic)).values()].some((o) => o > 0) &&
        (await lines()).length > 300,
      { what: 'the child to handle and commit some records' },
    );
    child.kill('SIGKILL');
    await exited;

    const handled = new Set(await lines());
    assert.ok(handled.size < total, 'killed before the end');
    for (const [partition, upTo] of await committedOffsets(admin, groupId, topic)) {
      for (let offset = 0; offset < upTo; offset++) {
        assert.ok(
          handled.has(`${partition} ${offset}`),
          `committed ${partition}@${offset} was never handled`,
        );
      }
    }
  });

  it('hands partitions over in a rebalance without handling an id twice or out of order', async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const total = 3_000;
    await produce(
      await testProducer(t, kafka),
      topic,
      Array.from({ length: total }, (_, i) => ({ key: `k${i}`, value: `v${i}` })),
    );
    const repository = new MemoryRepository();
    const log: (Handled & { by: string })[] = [];
    const member = (by: string, k: Kafka) =>
      start(t, {
        kafka: k,
        topics: [topic],
        groupId,
        idempotent: consumerOf(repository),
        batchSize: 50,
        consumerConfig: { heartbeatInterval: 500, maxWaitTimeInMs: 200 },
        handler: async (record, context) => {
          // Slow enough that the second member joins while the first is busy.
          await new Promise((r) => setTimeout(r, 2));
          log.push({ ...handledOf(record, context), by });
        },
      });
    await member('a', kafka);
    await waitFor(() => log.length >= 300, { what: 'the first member to start' });
    await member('b', testKafka({ clientId: 'idem-test-b' }));
    await waitForCommitted(admin, groupId, topic, { timeoutMs: 50_000 });

    assert.equal(log.length, total);
    assert.equal(new Set(log.map((h) => h.id)).size, total);
    assertPartitionOrder(log);
    assert.ok(
      log.some((h) => h.by === 'b'),
      'the second member took over partitions',
    );
  });
});
