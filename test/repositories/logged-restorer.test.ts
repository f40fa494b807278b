import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import {
  ChangelogCheckpoint,
  ChangelogReader,
  encodeMark,
  ensureChangelogTopic,
  KafkaChangelogSource,
  markRecord,
} from '../../src/kafka/changelog/index.js';
import {
  type ChangelogChange,
  type ChangelogOffsets,
  ChangelogRestorer,
  type ChangelogSource,
  type ChangelogSourceRead,
  LoggedRepository,
  MemoryChangelog,
  type UnreadableChange,
} from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import {
  kafkaAdmin,
  onCleanup,
  produce,
  randomName,
  testClient,
  testKafka,
  testPortAdmin,
  testProducer,
} from '../helpers/kafka.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const EXPIRES = Date.now() + 3_600_000;

/** One changelog record of an in-memory source: a change, or a record that cannot be read. */
type Entry = ChangelogChange | { readonly unreadable: string };

/** A changelog held in memory, per partition, read one record per batch. */
class ListSource implements ChangelogSource {
  readonly topic = 'list';
  readonly reads: ReadonlyMap<number, number>[] = [];
  constructor(readonly partitions: ReadonlyMap<number, readonly Entry[]>) {}

  async endOffsets(partitions: readonly number[]): Promise<ChangelogOffsets> {
    return new Map(partitions.map((p) => [p, this.partitions.get(p)?.length ?? 0]));
  }

  async read(options: ChangelogSourceRead): Promise<ChangelogOffsets> {
    (this.reads as ReadonlyMap<number, number>[]).push(new Map(options.from));
    const reached: ChangelogOffsets = new Map();
    for (const [partition, start] of options.from) {
      const entries = this.partitions.get(partition) ?? [];
      for (let offset = start; offset < entries.length; offset++) {
        const entry = entries[offset] as Entry;
        if ('unreadable' in entry) {
          options.onUnreadable({ topic: this.topic, partition, offset, reason: entry.unreadable });
          await options.onBatch(partition, [], offset + 1);
        } else {
          await options.onBatch(partition, [entry], offset + 1);
        }
        await options.heartbeat?.();
      }
      reached.set(partition, Math.max(start, entries.length));
    }
    return reached;
  }
}

function mark(id: string): ChangelogChange {
  return { key: id, record: markRecord(id, { expiresAt: EXPIRES }) };
}

async function checkpointFile(t: TestContext, topic: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'idem-restorer-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return join(dir, `${topic}.changelog.json`);
}

async function held(store: LoggedRepository, ids: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const id of ids) if (await store.contains(id)) found.push(id);
  return found;
}

describe('changelog restorer', () => {
  it('restores each partition from its checkpoint offset, skips and counts a bad record, checkpoints on close', async (t) => {
    const path = await checkpointFile(t, 'list');
    const saved = await ChangelogCheckpoint.load(path, 'list');
    saved.set(0, 2); // the local store already holds p0's first two records
    await saved.save();
    const source = new ListSource(
      new Map<number, Entry[]>([
        [0, [mark('a0'), mark('a1'), mark('a2'), { unreadable: 'unknown version byte 9' }, mark('a4')]],
        [1, [mark('b0'), { key: 'b0', record: undefined }, mark('b2')]],
      ]),
    );
    const inner = new MemoryRepository();
    const stores = new Map(
      [0, 1].map((p) => [p, new LoggedRepository(inner, new MemoryChangelog(), { closeInner: false })]),
    );
    const bad: UnreadableChange[] = [];
    let heartbeats = 0;
    let last = 0;
    const restorer = new ChangelogRestorer({
      source,
      checkpoints: ChangelogCheckpoint.load(path, 'list'),
    });
    let plan: { from: ReadonlyMap<number, number>; ends: ReadonlyMap<number, number> } | undefined;
    const result = await restorer.restore(stores, {
      heartbeat: async () => {
        heartbeats++;
      },
      onStart: (p) => {
        plan = p;
      },
      onProgress: ({ restored }) => {
        last = restored;
      },
      onUnreadable: (b) => bad.push(b),
    });
    assert.deepEqual(
      plan?.from,
      new Map([
        [0, 2],
        [1, 0],
      ]),
    );
    assert.deepEqual(
      plan?.ends,
      new Map([
        [0, 5],
        [1, 3],
      ]),
    );
    assert.deepEqual(
      result.reached,
      new Map([
        [0, 5],
        [1, 3],
      ]),
    );
    assert.equal(result.unreadable, 1);
    assert.deepEqual(bad, [{ topic: 'list', partition: 0, offset: 3, reason: 'unknown version byte 9' }]);
    assert.ok(heartbeats > 0);
    assert.equal(last, result.restored);
    const p0 = stores.get(0) as LoggedRepository;
    // Before the checkpoint: not read. The bad record: no mark. The deleted id: gone.
    assert.deepEqual(await held(p0, ['a0', 'a1', 'a2', 'a3', 'a4', 'b0', 'b2']), ['a2', 'a4', 'b2']);
    // The restore's end is checkpointed.
    assert.deepEqual(
      (await ChangelogCheckpoint.load(path, 'list')).offsets(),
      new Map([
        [0, 5],
        [1, 3],
      ]),
    );

    // A write that reached the changelog and the store moves the partition on; closing it checkpoints that.
    restorer.advanced(1, 7);
    assert.equal(await restorer.checkpoint(1), 7);
    assert.deepEqual(
      (await ChangelogCheckpoint.load(path, 'list')).offsets(),
      new Map([
        [0, 5],
        [1, 7],
      ]),
    );
    // A partition never restored has nothing to checkpoint.
    assert.equal(await restorer.checkpoint(2), undefined);

    // A second restore in the same process starts from what was applied, not from the file.
    await restorer.restore(new Map([[0, p0]]));
    assert.deepEqual(source.reads.at(-1), new Map([[0, 5]]));
    for (const store of stores.values()) await store.close();
  });

  it('a checkpoint that cannot be loaded fails the restore; one that cannot be written is reported', async (t) => {
    const source = new ListSource(new Map([[0, [mark('x')]]]));
    const store = new LoggedRepository(new MemoryRepository(), new MemoryChangelog());
    t.after(() => store.close());
    const broken = Promise.reject(new Error('cannot read the checkpoint'));
    await assert.rejects(
      new ChangelogRestorer({ source, checkpoints: broken }).restore(new Map([[0, store]])),
      /cannot read the checkpoint/,
    );
    const failures: number[] = [];
    const restorer = new ChangelogRestorer({
      source,
      checkpoints: {
        get: () => undefined,
        set: () => undefined,
        save: async () => {
          throw new Error('disk full');
        },
      },
      onCheckpointError: (_error, partition) => failures.push(partition),
    });
    const result = await restorer.restore(new Map([[0, store]]));
    assert.equal(result.restored, 1);
    assert.deepEqual(failures, [0]);
  });
});

describe('changelog restorer over a Kafka changelog', { skip: skipUnlessEnabled('kafka') }, () => {
  it('reads from the checkpoint up to the end, skips an unreadable record, and checkpoints', async (t) => {
    const kafka = testKafka();
    const admin = await kafkaAdmin(t, kafka);
    const topic = randomName('idem-restorer');
    await ensureChangelogTopic(await testPortAdmin(t), {
      topic,
      partitions: 2,
      retentionMs: 3_600_000,
      configKey: 'changelog.topic',
    });
    onCleanup(t, () => admin.deleteTopics({ topics: [topic] }).catch(() => undefined));
    const producer = await testProducer(t, kafka);
    const value = encodeMark({ expiresAt: EXPIRES });
    await produce(producer, topic, [
      { key: 'k0', value, partition: 0 },
      { key: 'k1', value, partition: 0 },
      { key: 'bad', value: Buffer.from([9, 0, 0, 0, 0, 0, 0, 0, 0]), partition: 0 },
      { key: 'k3', value, partition: 0 },
      { key: 'q0', value, partition: 1 },
    ]);
    const path = await checkpointFile(t, topic);
    const saved = await ChangelogCheckpoint.load(path, topic);
    saved.set(0, 1);
    await saved.save();
    const reader = new ChangelogReader(await testClient(t));
    onCleanup(t, () => reader.close());
    const inner = new MemoryRepository();
    const stores = new Map(
      [0, 1].map((p) => [p, new LoggedRepository(inner, new MemoryChangelog(), { closeInner: false })]),
    );
    const restorer = new ChangelogRestorer({
      source: new KafkaChangelogSource({ reader, topic }),
      checkpoints: ChangelogCheckpoint.load(path, topic),
    });
    const bad: UnreadableChange[] = [];
    const result = await restorer.restore(stores, { onUnreadable: (b) => bad.push(b) });
    assert.deepEqual(
      result.reached,
      new Map([
        [0, 4],
        [1, 1],
      ]),
    );
    assert.equal(result.unreadable, 1);
    assert.deepEqual(
      bad.map(({ topic: tp, partition, offset }) => ({ topic: tp, partition, offset })),
      [{ topic, partition: 0, offset: 2 }],
    );
    assert.equal(result.restored, 3);
    assert.deepEqual(await held(stores.get(0) as LoggedRepository, ['k0', 'k1', 'bad', 'k3', 'q0']), [
      'k1',
      'k3',
      'q0',
    ]);
    assert.deepEqual(
      (await ChangelogCheckpoint.load(path, topic)).offsets(),
      new Map([
        [0, 4],
        [1, 1],
      ]),
    );
    for (const store of stores.values()) await store.close();
  });
});
