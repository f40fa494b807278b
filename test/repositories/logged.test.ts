import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  ChangelogReader,
  decodeChanges,
  ensureChangelogTopic,
  KafkaChangelogSink,
} from '../../src/kafka/changelog/index.js';
import type { KafkaAdmin, KafkaClient, KafkaProducer } from '../../src/kafka/port/index.js';
import { LoggedRepository, MemoryChangelog } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import { repositoryContract } from '../contract/index.js';
import { testClient } from '../helpers/kafka.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

/*
 * The logged store runs the whole contract as a persistent store whose persistence is its changelog alone: each
 * open builds a new, empty inner store and restores it from the namespace's changelog. A write that reached the
 * inner store but not the log (a forgotten verb) is lost at the reopen, and the contract's reopen tests fail.
 */
const changelogs = new Map<string, MemoryChangelog>();
function changelogOf(namespace: string): MemoryChangelog {
  let log = changelogs.get(namespace);
  if (!log) {
    log = new MemoryChangelog();
    changelogs.set(namespace, log);
  }
  return log;
}

async function reopened(inner: ConstructorParameters<typeof LoggedRepository>[0], namespace: string) {
  const log = changelogOf(namespace);
  const repository = new LoggedRepository(inner, log, {
    capabilities: { ...inner.capabilities, persistent: true },
  });
  await repository.restore(log.changes);
  return repository;
}

describe('logged over memory (local record access)', () => {
  repositoryContract({
    name: 'logged memory',
    factory: ({ namespace }) => reopened(new MemoryRepository(), `memory/${namespace}`),
    capabilities: {
      persistent: true,
      shared: false,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});

// RocksDB has no local record access: writes, undo and restore go through its verbs (the node's setup).
const root = join(tmpdir(), `idem-logged-contract-${process.pid}`);
let opened = 0;
describe('logged over rocksdb (through the store verbs)', { skip: skipUnlessEnabled('rocksdb') }, () => {
  after(() => rm(root, { recursive: true, force: true }));
  repositoryContract({
    name: 'logged rocksdb',
    factory: async ({ namespace }) =>
      reopened(
        await RocksdbRepository.open({ path: join(root, `${namespace}-${opened++}`) }),
        `rocksdb/${namespace}`,
      ),
    capabilities: {
      persistent: true,
      shared: false,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 1_048_576,
    },
  });
});

describe('logged restore through the store verbs', { skip: skipUnlessEnabled('rocksdb') }, () => {
  it('replaces an older state the store still holds (a claim confirmed since), keeping the first-seen time', async () => {
    const path = join(tmpdir(), `idem-logged-older-state-${process.pid}`);
    const inner = await RocksdbRepository.open({ path });
    try {
      const t = Date.now() - 5_000;
      // What the store held when it last left off (a checkpoint): the id's claim, live at its own first-seen time.
      await inner.add('x', { ttlMs: 600_000, leaseMs: 600_000, owner: 'w', now: t });
      const logged = new LoggedRepository(inner, new MemoryChangelog(), { closeInner: false });
      const confirmed = {
        id: 'x',
        state: 'confirmed',
        expiresAt: Date.now() + 600_000,
        firstSeenAt: t,
      } as const;
      await logged.restore([{ key: 'x', record: confirmed }]);
      const record = await inner.get('x');
      assert.equal(record?.state, 'confirmed', 'the claim the changelog confirmed since is still in-flight');
      assert.equal(record?.firstSeenAt, t);
    } finally {
      await inner.close();
      await rm(path, { recursive: true, force: true });
    }
  });
});

/*
 * The node's combination: a RocksDB store whose changelog is one partition of a Kafka topic, restored by reading
 * that partition back (read_committed) on each open.
 */
const kafkaRoot = join(tmpdir(), `idem-logged-kafka-contract-${process.pid}`);
describe('logged rocksdb over a Kafka changelog partition', { skip: skipUnlessEnabled('kafka') }, () => {
  let kafka: KafkaClient;
  let producer: KafkaProducer;
  let admin: KafkaAdmin;
  const topics = new Set<string>();
  let opens = 0;
  before(async () => {
    kafka = await testClient();
    producer = kafka.producer({ idempotent: true });
    admin = kafka.admin();
    await producer.connect();
    await admin.connect();
  });
  after(async () => {
    await admin.deleteTopics([...topics]).catch(() => undefined);
    await Promise.allSettled([producer.disconnect(), admin.disconnect()]);
    await kafka.close();
    await rm(kafkaRoot, { recursive: true, force: true });
  });
  repositoryContract({
    name: 'logged rocksdb (kafka changelog)',
    factory: async ({ namespace }) => {
      const topic = `idem-logged-${namespace.replace(/[^a-zA-Z0-9._-]/g, '_')}`;
      if (!topics.has(topic)) {
        topics.add(topic);
        await ensureChangelogTopic(admin, {
          topic,
          partitions: 2,
          retentionMs: 86_400_000,
          replicationFactor: 1,
          configKey: 'test',
        });
      }
      const inner = await RocksdbRepository.open({ path: join(kafkaRoot, `${namespace}-${opens++}`) });
      // Partition 1, as the node's partition 1 would write it.
      const sink = new KafkaChangelogSink({ client: kafka, producer, topic, partition: 1 });
      const repository = new LoggedRepository(inner, sink, {
        capabilities: { ...inner.capabilities, persistent: true, maxResultBytes: 262_144 },
      });
      const reader = new ChangelogReader(kafka);
      try {
        await reader.read({
          topic,
          from: new Map([[1, 0]]),
          onBatch: async (partition, records) => {
            await repository.restore(
              decodeChanges(topic, partition, records, (bad) => {
                throw new Error(`unreadable changelog record at offset ${bad.offset}: ${bad.reason}`);
              }),
            );
          },
        });
      } finally {
        await reader.close();
      }
      return repository;
    },
    capabilities: {
      persistent: true,
      shared: false,
      maxIdBytes: 1024,
      nativeBatch: true,
      maxResultBytes: 262_144,
    },
  });
});
