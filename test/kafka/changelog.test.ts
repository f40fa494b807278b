import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { type Kafka, type Message, Partitioners } from 'kafkajs';
import { ConfigError, InvalidInputError } from '../../src/errors.js';
import {
  ChangelogCheckpoint,
  type ChangelogEntry,
  ChangelogReader,
  decodeMark,
  decodeMarkExpiry,
  decodePack,
  encodeMark,
  encodePack,
  ensureChangelogTopic,
  isPack,
  markRecord,
  type PartitionOffsets,
  packEntryBytes,
  packKey,
  readChangelog,
} from '../../src/kafka/changelog/index.js';
import type { KafkaClient } from '../../src/kafka/port/index.js';
import {
  createTopic,
  createTopicsAndWait,
  kafkaAdmin,
  onCleanup,
  produce,
  randomName,
  testClient,
  testKafka,
  testPortAdmin,
  testProducer,
  waitFor,
} from '../helpers/kafka.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const HOUR = 3_600_000;

/** Marks for `count` ids in one partition, expiring at `expiresAt`. */
function marks(prefix: string, count: number, partition: number, expiresAt = 1_000_000): Message[] {
  return Array.from({ length: count }, (_, i) => ({
    key: `${prefix}-${i}`,
    value: encodeMark({ expiresAt: expiresAt + i }),
    partition,
  }));
}

/** Every record read, per partition, and the offsets each batch said to resume from. */
async function readAll(
  client: KafkaClient,
  topic: string,
  from: PartitionOffsets,
): Promise<{ records: Map<number, ChangelogEntry[]>; ends: PartitionOffsets }> {
  const records = new Map<number, ChangelogEntry[]>();
  const ends = await readChangelog(client, {
    topic,
    from,
    onBatch: (partition, batch, nextOffset) => {
      assert.ok(batch.every((r) => r.offset < nextOffset));
      records.set(partition, [...(records.get(partition) ?? []), ...batch]);
    },
  });
  return { records, ends };
}

async function changelogTopic(t: TestContext, kafka: Kafka, partitions = 3): Promise<string> {
  const admin = await kafkaAdmin(t, kafka);
  const topic = randomName('idem-changelog');
  assert.equal(
    await ensureChangelogTopic(await testPortAdmin(t), {
      topic,
      partitions,
      retentionMs: HOUR,
      configKey: 'changelog.topic',
    }),
    true,
  );
  onCleanup(t, () => admin.deleteTopics({ topics: [topic] }).catch(() => undefined));
  return topic;
}

describe('changelog codec', () => {
  it('encodes a bare mark in 9 bytes and a full record in a longer, versioned form', () => {
    const bare = encodeMark({ expiresAt: 1_764_000_000_123 });
    assert.equal(bare.length, 9);
    assert.deepEqual(decodeMark(bare), { expiresAt: 1_764_000_000_123 });
    assert.deepEqual(markRecord('k', decodeMark(bare)), {
      id: 'k',
      state: 'confirmed',
      expiresAt: 1_764_000_000_123,
    });
    const full = {
      state: 'in-flight',
      expiresAt: 2_000,
      leaseExpiresAt: 1_500,
      owner: 'w\u0001 1',
      eventTime: 900,
      fingerprint: 'sha:ab',
      result: '{"ok":true}',
    } as const;
    const encoded = encodeMark(full);
    assert.equal(decodeMarkExpiry(encoded), 2_000);
    assert.deepEqual(decodeMark(encoded), full);
    // With its first-seen time: a bare mark in 17 bytes (format 3), a full record with it in the text form.
    const seen = encodeMark({ expiresAt: 1_764_000_000_123, firstSeenAt: 1_763_000_000_456 });
    assert.equal(seen.length, 17);
    assert.equal(decodeMarkExpiry(seen), 1_764_000_000_123);
    assert.deepEqual(decodeMark(seen), { expiresAt: 1_764_000_000_123, firstSeenAt: 1_763_000_000_456 });
    assert.deepEqual(decodeMark(encodeMark({ ...full, firstSeenAt: 800 })), { ...full, firstSeenAt: 800 });
    // A V2 value written before first-seen times existed (no eighth field) still reads, without one.
    const old = Buffer.concat([
      encoded.subarray(0, 9),
      Buffer.from('f\u00012000\u00011500\u0001o\u0001\u0001', 'utf8'),
    ]);
    assert.deepEqual(decodeMark(old), {
      state: 'in-flight',
      expiresAt: 2_000,
      leaseExpiresAt: 1_500,
      owner: 'o',
    });
  });

  it('packs many changes in one value, in order, deletions and every mark format kept', () => {
    const changes = [
      { key: 'a', value: encodeMark({ expiresAt: 1_000 }) },
      { key: '\u0000b64:AAE=', value: encodeMark({ expiresAt: 2_000, firstSeenAt: 1_500 }) },
      { key: 'a', value: null },
      { key: 'ünï', value: encodeMark({ expiresAt: 3_000, state: 'in-flight', owner: 'w' }) },
    ];
    const bytes = changes.reduce((n, c) => n + packEntryBytes(Buffer.byteLength(c.key), c.value), 0);
    const value = encodePack(changes, bytes);
    assert.ok(isPack(value));
    assert.ok(!isPack(encodeMark({ expiresAt: 1 })));
    assert.deepEqual(decodePack(value), changes);
    assert.deepEqual(decodePack(encodePack([], 0)), []);
    assert.ok(packKey().startsWith('\u0000pack:'));
    assert.notEqual(packKey(), packKey());
    assert.throws(() => decodeMark(value), InvalidInputError, 'a pack is not a mark');
  });

  it('rejects a value of an unknown format with InvalidInputError', () => {
    assert.throws(() => decodeMark(Buffer.from([9, 0, 0, 0, 0, 0, 0, 0, 0])), InvalidInputError);
    assert.throws(() => decodeMark(Buffer.alloc(0)), /null value/);
    assert.throws(() => decodeMark(Buffer.from([3, 0, 0, 0, 0, 0, 0, 0, 0])), InvalidInputError);
  });
});

describe('changelog checkpoint', () => {
  it('saves atomically and loads per partition; another topic or a torn file means from the start', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-checkpoint-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'sub', 'changelog.checkpoint');
    const empty = await ChangelogCheckpoint.load(path, 'topic-a');
    assert.deepEqual(
      empty.from([0, 1]),
      new Map([
        [0, 0],
        [1, 0],
      ]),
    );
    empty.set(0, 42);
    empty.set(2, 7);
    await empty.save();
    const loaded = await ChangelogCheckpoint.load(path, 'topic-a');
    assert.deepEqual(
      loaded.offsets(),
      new Map([
        [0, 42],
        [2, 7],
      ]),
    );
    assert.deepEqual(
      loaded.from([0, 1, 2]),
      new Map([
        [0, 42],
        [1, 0],
        [2, 7],
      ]),
    );
    assert.equal((await ChangelogCheckpoint.load(path, 'topic-b')).offsets().size, 0);
    await writeFile(path, '{"version":1,"topic":"topic-a","partitions":{"0":');
    assert.equal((await ChangelogCheckpoint.load(path, 'topic-a')).offsets().size, 0);
  });

  it('concurrent saves all succeed and leave the latest offsets, from one checkpoint or two on one file', async (t) => {
    // The node's join handler (closing revoked partitions) can save while its batch loop restores: with one
    // temporary file name per process, the second rename found the file gone (ENOENT).
    const dir = await mkdtemp(join(tmpdir(), 'idem-checkpoint-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'changelog.json');
    const one = await ChangelogCheckpoint.load(path, 'topic-a');
    const saves: Promise<void>[] = [];
    for (let i = 1; i <= 40; i++) {
      one.set(i % 4, i);
      saves.push(one.save());
    }
    await Promise.all(saves);
    const expected = new Map([
      [0, 40],
      [1, 37],
      [2, 38],
      [3, 39],
    ]);
    assert.deepEqual((await ChangelogCheckpoint.load(path, 'topic-a')).offsets(), expected);
    // Two checkpoint objects of one file (two lifecycles of one process): no save fails either.
    const other = await ChangelogCheckpoint.load(path, 'topic-a');
    other.set(9, 1);
    await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? one : other).save()));
    const last = (await ChangelogCheckpoint.load(path, 'topic-a')).offsets();
    assert.ok(
      ['0:40,1:37,2:38,3:39', '0:40,1:37,2:38,3:39,9:1'].includes(
        [...last].map(([p, o]) => `${p}:${o}`).join(','),
      ),
      `the file holds one whole save: ${JSON.stringify([...last])}`,
    );
  });
});

describe('changelog on the broker', { skip: skipUnlessEnabled('kafka') }, () => {
  it('round trip: reads every partition to its end, each record in its partition and order', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka);
    const producer = await testProducer(t, kafka);
    await produce(producer, topic, [...marks('p0', 500, 0), ...marks('p1', 300, 1)]);
    const { records, ends } = await readAll(
      await testClient(t),
      topic,
      new Map([
        [0, 0],
        [1, 0],
        [2, 0],
      ]),
    );
    assert.deepEqual(
      ends,
      new Map([
        [0, 500],
        [1, 300],
        [2, 0],
      ]),
    );
    assert.deepEqual(
      records.get(0)?.map((r) => r.key),
      marks('p0', 500, 0).map((m) => m.key),
    );
    assert.deepEqual(
      records.get(0)?.map((r) => r.offset),
      [...Array(500).keys()],
    );
    assert.equal(records.get(1)?.length, 300);
    assert.equal(records.has(2), false);
    assert.deepEqual(decodeMark(records.get(1)?.[299]?.value as Buffer), { expiresAt: 1_000_299 });
  });

  it('reads from a checkpoint: only what was written after the saved offsets', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka, 2);
    const producer = await testProducer(t, kafka);
    await produce(producer, topic, [...marks('old', 100, 0), ...marks('old', 50, 1)]);
    const dir = await mkdtemp(join(tmpdir(), 'idem-checkpoint-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'checkpoint');
    const checkpoint = await ChangelogCheckpoint.load(path, topic);
    await readChangelog(await testClient(t), {
      topic,
      from: checkpoint.from([0, 1]),
      onBatch: (partition, _records, nextOffset) => checkpoint.set(partition, nextOffset),
    });
    await checkpoint.save();
    await produce(producer, topic, [...marks('new', 20, 0), ...marks('new', 5, 1)]);
    const reloaded = await ChangelogCheckpoint.load(path, topic);
    assert.deepEqual(
      reloaded.offsets(),
      new Map([
        [0, 100],
        [1, 50],
      ]),
    );
    const { records, ends } = await readAll(await testClient(t), topic, reloaded.from([0, 1]));
    assert.deepEqual(
      records.get(0)?.map((r) => r.key),
      marks('new', 20, 0).map((m) => m.key),
    );
    assert.equal(records.get(1)?.length, 5);
    assert.deepEqual(
      ends,
      new Map([
        [0, 120],
        [1, 55],
      ]),
    );
  });

  it('never reads the marks of an aborted transaction, and reads past its markers to the end', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka, 1);
    const producer = kafka.producer({
      transactionalId: randomName('idem-txn'),
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await producer.connect();
    onCleanup(t, () => producer.disconnect());
    const committed1 = await producer.transaction();
    await committed1.send({ topic, messages: marks('kept-a', 10, 0) });
    await committed1.commit();
    for (let round = 0; round < 3; round++) {
      const aborted = await producer.transaction();
      await aborted.send({ topic, messages: marks(`aborted-${round}`, 25, 0) });
      await aborted.abort();
    }
    const committed2 = await producer.transaction();
    await committed2.send({ topic, messages: marks('kept-b', 10, 0) });
    await committed2.commit();
    const last = await producer.transaction();
    await last.send({ topic, messages: marks('aborted-last', 5, 0) });
    await last.abort();
    // EndTxn answers before the coordinator has written the markers; the read captures its end offsets when it
    // starts, so it waits for the last marker to be down (offset 105: the end is 106).
    const admin = await kafkaAdmin(t, kafka);
    let high = '';
    await waitFor(
      async () => {
        high = (await admin.fetchTopicOffsets(topic))[0]?.high ?? '';
        return high === '106';
      },
      { what: () => `the abort marker of ${topic} (end ${high}, want 106)` },
    );

    const { records, ends } = await readAll(await testClient(t), topic, new Map([[0, 0]]));
    const keys = records.get(0)?.map((r) => r.key) ?? [];
    assert.deepEqual(
      keys,
      [...marks('kept-a', 10, 0), ...marks('kept-b', 10, 0)].map((m) => m.key),
    );
    // 10 + 75 + 10 + 5 records and 6 transaction markers: the read ends after the last marker.
    assert.deepEqual(ends, new Map([[0, 106]]));
    // Read again from an offset inside an aborted transaction: still none of its marks.
    const again = await readAll(await testClient(t), topic, new Map([[0, 20]]));
    assert.deepEqual(
      again.records.get(0)?.map((r) => r.key),
      marks('kept-b', 10, 0).map((m) => m.key),
    );
  });

  it('stops at the end offsets captured at the start: later records and open transactions are not waited for', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka, 1);
    const producer = await testProducer(t, kafka);
    await produce(producer, topic, marks('before', 200, 0));
    // A transaction left open: its records are past the last stable offset, so the read must not wait for it.
    const transactional = kafka.producer({
      transactionalId: randomName('idem-txn'),
      idempotent: true,
      maxInFlightRequests: 1,
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    await transactional.connect();
    onCleanup(t, () => transactional.disconnect());
    const open = await transactional.transaction();
    await open.send({ topic, messages: marks('open', 3, 0) });
    onCleanup(t, () => open.abort().catch(() => undefined));

    let producedDuringRead = false;
    const records: ChangelogEntry[] = [];
    const ends = await readChangelog(await testClient(t), {
      topic,
      from: new Map([[0, 0]]),
      maxBytesPerPartition: 1024, // several fetches, so records arrive while the read is on
      onBatch: async (_partition, batch) => {
        records.push(...batch);
        if (!producedDuringRead) {
          producedDuringRead = true;
          await produce(producer, topic, marks('after', 50, 0));
        }
      },
    });
    assert.equal(producedDuringRead, true);
    assert.deepEqual(ends, new Map([[0, 200]]));
    assert.deepEqual(
      records.map((r) => r.key),
      marks('before', 200, 0).map((m) => m.key),
    );
  });

  it('hands tombstones over as null values', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka, 1);
    const producer = await testProducer(t, kafka);
    await produce(producer, topic, [...marks('id', 2, 0), { key: 'id-0', value: null, partition: 0 }]);
    const { records } = await readAll(await testClient(t), topic, new Map([[0, 0]]));
    assert.deepEqual(
      records.get(0)?.map((r) => [r.key, r.value === null]),
      [
        ['id-0', false],
        ['id-1', false],
        ['id-0', true],
      ],
    );
  });

  it('reads compressed batches too (left to the kafkajs decoder), between uncompressed ones', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka, 1);
    const producer = await testProducer(t, kafka);
    await produce(producer, topic, marks('plain-a', 30, 0));
    // 1 is CompressionTypes.GZIP (kafkajs's CommonJS enums are not named ESM exports).
    await producer.send({ topic, acks: -1, compression: 1, messages: marks('gzip', 40, 0) });
    await produce(producer, topic, marks('plain-b', 30, 0));
    const { records, ends } = await readAll(await testClient(t), topic, new Map([[0, 0]]));
    assert.deepEqual(
      records.get(0)?.map((r) => r.key),
      [...marks('plain-a', 30, 0), ...marks('gzip', 40, 0), ...marks('plain-b', 30, 0)].map((m) => m.key),
    );
    assert.deepEqual(
      records.get(0)?.map((r) => r.offset),
      [...Array(100).keys()],
    );
    assert.deepEqual(ends, new Map([[0, 100]]));
  });

  it('restarts a partition from its start when the checkpoint lies past its end (a recreated topic)', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka, 1);
    await produce(await testProducer(t, kafka), topic, marks('id', 10, 0));
    const { records, ends } = await readAll(await testClient(t), topic, new Map([[0, 5_000]]));
    assert.equal(records.get(0)?.length, 10);
    assert.deepEqual(ends, new Map([[0, 10]]));
  });

  it('serves concurrent reads of different partitions from one reader, with a heartbeat per fetch and an abort', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka, 2);
    await produce(await testProducer(t, kafka), topic, [...marks('a', 400, 0), ...marks('b', 300, 1)]);
    const reader = new ChangelogReader(await testClient(t), { maxBytesPerPartition: 4096 });
    onCleanup(t, () => reader.close());
    const keys = new Map<number, string[]>();
    let heartbeats = 0;
    const read = (partition: number) =>
      reader.read({
        topic,
        from: new Map([[partition, 0]]),
        heartbeat: async () => {
          heartbeats++;
        },
        onBatch: (p, batch) => {
          keys.set(p, [...(keys.get(p) ?? []), ...batch.map((r) => r.key)]);
        },
      });
    const [ends0, ends1] = await Promise.all([read(0), read(1)]);
    assert.deepEqual([ends0, ends1], [new Map([[0, 400]]), new Map([[1, 300]])]);
    assert.equal(keys.get(0)?.length, 400);
    assert.equal(keys.get(1)?.length, 300);
    assert.ok(heartbeats >= 2, `${heartbeats} heartbeats`);
    const controller = new AbortController();
    const stopped = new Error('stopped');
    await assert.rejects(
      reader.read({
        topic,
        from: new Map([[0, 0]]),
        signal: controller.signal,
        onBatch: () => controller.abort(stopped),
      }),
      (error: unknown) => error === stopped,
    );
  });

  it('follows the topic after catching up, until aborted', async (t) => {
    const kafka = testKafka();
    const topic = await changelogTopic(t, kafka, 2);
    const producer = await testProducer(t, kafka);
    await produce(producer, topic, marks('early', 30, 1));
    const reader = new ChangelogReader(await testClient(t));
    onCleanup(t, () => reader.close());
    const controller = new AbortController();
    const seen: string[] = [];
    let caughtUpAt: PartitionOffsets | undefined;
    const done = reader.read({
      topic,
      from: new Map([
        [0, 0],
        [1, 0],
      ]),
      follow: true,
      signal: controller.signal,
      onCaughtUp: (ends) => {
        caughtUpAt = ends;
        void produce(producer, topic, marks('late', 7, 0));
      },
      onBatch: (_p, batch) => {
        seen.push(...batch.map((r) => r.key));
        if (seen.length === 37) controller.abort();
      },
    });
    const final = await done;
    assert.deepEqual(
      caughtUpAt,
      new Map([
        [0, 0],
        [1, 30],
      ]),
    );
    assert.deepEqual(
      final,
      new Map([
        [0, 7],
        [1, 30],
      ]),
    );
    assert.equal(seen.filter((k) => k.startsWith('late-')).length, 7);
  });
});

describe('changelog topic', { skip: skipUnlessEnabled('kafka') }, () => {
  it('rejects an existing topic with the wrong partition count, naming the topic and the config key', async (t) => {
    const kafka = testKafka();
    const admin = await kafkaAdmin(t, kafka);
    const topic = await createTopic(t, admin, { partitions: 2 });
    await assert.rejects(
      ensureChangelogTopic(await testPortAdmin(t), {
        topic,
        partitions: 3,
        retentionMs: HOUR,
        configKey: 'output.changelogTopic',
      }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.key, 'output.changelogTopic');
        assert.match(
          error.message,
          new RegExp(`^output\\.changelogTopic: changelog topic "${topic}" has 2 partitions`),
        );
        return true;
      },
    );
  });

  it('rejects an existing topic that is not compacted, and accepts a matching one', async (t) => {
    const kafka = testKafka();
    const admin = await kafkaAdmin(t, kafka);
    const topic = await createTopic(t, admin, { partitions: 2 });
    await assert.rejects(
      ensureChangelogTopic(await testPortAdmin(t), {
        topic,
        partitions: 2,
        retentionMs: HOUR,
        configKey: 'repository.topic',
      }),
      /repository\.topic: .*cleanup\.policy=delete.*must be compacted/,
    );
    const good = await changelogTopic(t, kafka, 2);
    assert.equal(
      await ensureChangelogTopic(await testPortAdmin(t), {
        topic: good,
        partitions: 2,
        retentionMs: HOUR,
        configKey: 'x',
      }),
      false,
    );
    await assert.rejects(
      ensureChangelogTopic(await testPortAdmin(t), {
        topic: good,
        partitions: 2,
        retentionMs: 2 * HOUR,
        configKey: 'x',
      }),
      /retention\.ms=3600000, shorter than the 7200000 ms/,
    );
  });

  it('takes a packed changelog only where delete with a finite retention removes its records', async (t) => {
    const kafka = testKafka();
    const admin = await kafkaAdmin(t, kafka);
    const compactOnly = randomName('idem-changelog-compact');
    const forever = randomName('idem-changelog-forever');
    onCleanup(t, () => admin.deleteTopics({ topics: [compactOnly, forever] }).catch(() => undefined));
    await createTopicsAndWait(admin, [
      { topic: compactOnly, numPartitions: 1, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] },
      {
        topic: forever,
        numPartitions: 1,
        configEntries: [
          { name: 'cleanup.policy', value: 'compact,delete' },
          { name: 'retention.ms', value: '-1' },
        ],
      },
    ]);
    const port = await testPortAdmin(t);
    const spec = { partitions: 1, retentionMs: HOUR, configKey: 'changelog.topic' };
    // One record per id: compaction keeps the changelog bounded by the live ids.
    for (const topic of [compactOnly, forever]) {
      assert.equal(await ensureChangelogTopic(port, { ...spec, topic }), false);
    }
    // Packs: nothing would ever remove them.
    for (const topic of [compactOnly, forever]) {
      await assert.rejects(ensureChangelogTopic(port, { ...spec, topic, packed: true }), (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.equal(error.key, 'changelog.topic');
        assert.match(error.message, /needs cleanup\.policy=compact,delete and a finite retention\.ms/);
        return true;
      });
    }
    const good = await changelogTopic(t, kafka, 1);
    assert.equal(await ensureChangelogTopic(port, { ...spec, topic: good, packed: true }), false);
  });
});
