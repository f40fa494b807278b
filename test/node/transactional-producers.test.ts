import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import {
  GenerationMovedError,
  instanceIdFile,
  instanceTransactionalId,
  resolveInstanceId,
  sameGeneration,
  transactionalId,
  transactionalProducerLayout,
} from '../../src/node/exactly-once/producers.js';
import { nodeConfigSchema } from '../../src/node/options.js';
import { followsOn } from '../../src/node/partition-state.js';

// Exactly-once's two producer layouts (issue 21): one transactional producer per input partition (fenced by its
// id), or one per instance (fenced by the group's generation, KIP-447). What the config says and what it refuses;
// the layouts' behaviour against the broker is in exactly-once*.test.ts, run on both clients.

const base = {
  kafka: { brokers: ['127.0.0.1:9092'] },
  input: { topic: 'in', groupId: 'g' },
  output: { topic: 'out', guarantee: 'exactly-once' },
  dlq: { topic: 'dlq' },
  dedup: { id: 'uid' },
};

function parse(extra: { kafka?: object; output?: object; repository?: object; changelog?: object } = {}) {
  return nodeConfigSchema.parse({
    ...base,
    ...(extra.repository ? { repository: extra.repository } : {}),
    ...(extra.changelog ? { changelog: extra.changelog } : {}),
    kafka: { ...base.kafka, ...extra.kafka },
    output: { ...base.output, ...extra.output },
  });
}

describe('exactly-once transactional producer layout', () => {
  it('defaults to per-instance on a client that fences by group, per-partition otherwise', () => {
    const config = parse();
    assert.equal(transactionalProducerLayout(config, { fencesByGroup: true }), 'per-instance');
    assert.equal(transactionalProducerLayout(config, { fencesByGroup: false }), 'per-partition');
    const asked = parse({
      kafka: { client: 'platformatic' },
      output: { transactionalProducer: 'per-partition' },
    });
    assert.equal(transactionalProducerLayout(asked, { fencesByGroup: true }), 'per-partition');
  });

  it('refuses per-instance on kafkajs, naming the key, in the config and against the client', () => {
    const result = nodeConfigSchema.safeParse({
      ...base,
      kafka: { ...base.kafka, client: 'kafkajs' },
      output: { ...base.output, transactionalProducer: 'per-instance' },
    });
    assert.equal(result.success, false);
    assert.deepEqual(result.error?.issues[0]?.path, ['output', 'transactionalProducer']);
    assert.match(String(result.error?.issues[0]?.message), /kafka\.client = "platformatic"/);
    // A client handed in code that cannot fence by group, under a config that says platformatic.
    const config = parse({
      kafka: { client: 'platformatic' },
      output: { transactionalProducer: 'per-instance' },
    });
    assert.throws(
      () => transactionalProducerLayout(config, { fencesByGroup: false }),
      (error: unknown) => error instanceof ConfigError && error.key === 'output.transactionalProducer',
    );
  });

  it('names per-partition and per-instance ids apart: an instance called "0" is not partition 0', () => {
    const config = parse({ output: { transactionalIdPrefix: 'p' } });
    assert.equal(transactionalId(config, 0), 'p-in-0');
    assert.equal(instanceTransactionalId(config, '0'), 'p-in-instance-0');
  });

  it('refuses an instance id that is not a plain name', () => {
    const result = nodeConfigSchema.safeParse({ ...base, output: { ...base.output, instanceId: 'a b' } });
    assert.equal(result.success, false);
    assert.deepEqual(result.error?.issues[0]?.path, ['output', 'instanceId']);
  });
});

describe('exactly-once instance id', () => {
  it('is output.instanceId when set', () => {
    const config = parse({ output: { instanceId: 'node-a' } });
    assert.deepEqual(resolveInstanceId(config), { id: 'node-a', source: 'output.instanceId' });
  });

  it('is kept beside a RocksDB store: the same id after a restart, another for another store', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-instance-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const a = parse({ repository: { type: 'rocksdb', path: join(dir, 'a', 'store') } });
    assert.equal(instanceIdFile(a), join(dir, 'a', 'store.instance-id'));
    const first = resolveInstanceId(a);
    assert.equal(first.source, join(dir, 'a', 'store.instance-id'));
    assert.equal((await readFile(first.source, 'utf8')).trim(), first.id);
    assert.deepEqual(resolveInstanceId(a), first, 'a restart reads the same id');
    const b = parse({ repository: { type: 'rocksdb', path: join(dir, 'b', 'store') } });
    assert.notEqual(resolveInstanceId(b).id, first.id);
  });

  it('is kept beside a configured checkpoint; new per process when nothing local survives', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-instance-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const checkpoint = join(dir, 'changelog.json');
    const withCheckpoint = parse({ changelog: { checkpoint } });
    assert.equal(resolveInstanceId(withCheckpoint).source, `${checkpoint}.instance-id`);
    const memory = parse();
    assert.equal(instanceIdFile(memory), undefined);
    assert.notEqual(resolveInstanceId(memory).id, resolveInstanceId(memory).id);
  });

  it('fails naming the file when it holds something else (a new id would leave the old transaction open)', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-instance-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const config = parse({ repository: { type: 'rocksdb', path: join(dir, 'store') } });
    await writeFile(join(dir, 'store.instance-id'), 'not an id!\n');
    assert.throws(
      () => resolveInstanceId(config),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.key === 'output.instanceId' &&
        error.message.includes(join(dir, 'store.instance-id')),
    );
  });
});

describe('a chunk pinned to its group generation', () => {
  it('matches only the same generation of the same member', () => {
    const a = { groupId: 'g', generationId: 3, memberId: 'm1' };
    assert.equal(sameGeneration(a, { ...a }), true);
    assert.equal(sameGeneration(a, { ...a, generationId: 4 }), false);
    assert.equal(sameGeneration(a, { ...a, memberId: 'm2' }), false);
    // kafkajs knows no generation: always the same.
    assert.equal(sameGeneration({ groupId: 'g' }, { groupId: 'g' }), true);
    assert.match(new GenerationMovedError(a, { ...a, generationId: 4 }).message, /generation 3 .* now in 4/);
  });
});

describe('a per-instance member that rejoins', () => {
  it('keeps its partitions only across the next generation of the same member', () => {
    const last = { memberId: 'm1', generationId: 4 };
    assert.equal(followsOn(undefined, { memberId: 'm1', generationId: 1 }), true, 'a first join');
    assert.equal(followsOn(last, { memberId: 'm1', generationId: 5 }), true);
    assert.equal(followsOn(last, { memberId: 'm1', generationId: 6 }), false, 'a generation was missed');
    assert.equal(followsOn(last, { memberId: 'm2', generationId: 5 }), false, 'expelled and joined anew');
    assert.equal(followsOn(last, { memberId: 'm1' }), false, 'no generation known');
  });
});
