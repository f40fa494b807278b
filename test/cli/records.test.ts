// @kafka-client-pinned: the kafka store runs on the package's default client; inspect/forget use only the
// repository interface, which both clients' contract suites already hold.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { Kafka, logLevel } from 'kafkajs';
import {
  type ForgetReport,
  forgetRecords,
  inspectRecords,
  parseIds,
  type RecordReport,
  storeStats,
} from '../../src/cli/records.js';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { DynamoDbRepository } from '../../src/repositories/dynamodb/index.js';
import { KafkaRepository } from '../../src/repositories/kafka/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { MySqlRepository } from '../../src/repositories/mysql/index.js';
import { PostgresRepository } from '../../src/repositories/postgres/index.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { createTestTable as createMysqlTable, testTable as mysqlTable } from '../helpers/mysql.js';
import { createTestTable as createPostgresTable, testTable as postgresTable } from '../helpers/postgres.js';
import { endpoints, type StoreName, skipUnlessEnabled } from '../helpers/stores.js';
import { runCli } from './run-cli.js';

// Issue 36 §3: `idem inspect` / `idem forget` look into and remove from every store through the repository
// interface. RocksDB runs through the real binary; the other stores through the same functions in-process.

const DAY = 86_400_000;
const MINUTE = 60_000;
/** A kept failure and a kept value as the consumer's OutcomeCodec writes them. */
const FAILURE = 'e{"name":"Error","message":"boom"}';
const VALUE = 'v{"total":42}';

/** Fills the store with one id in each state; `bytes` is a binary id (a Kafka key). */
async function fill(repository: IdempotentRepository): Promise<void> {
  await repository.add('conf', { ttlMs: DAY }, { fingerprint: 'fp-1' });
  await repository.add('fly', { ttlMs: DAY, leaseMs: 10 * MINUTE, owner: 'worker-1' });
  for (const [id, result] of [
    ['fail', FAILURE],
    ['val', VALUE],
  ] as const) {
    await repository.add(id, { ttlMs: DAY, leaseMs: MINUTE, owner: 'worker-2' });
    assert.equal(await repository.confirm({ id, owner: 'worker-2' }, { ttlMs: DAY, result }), true);
  }
  await repository.add(Buffer.from([1, 2, 255]), { ttlMs: DAY });
}

const IDS = parseIds(['conf', 'fly', 'fail', 'val', 'never']).concat(parseIds(['0102ff'], 'hex'));

const byId = <T extends { id: string }>(reports: readonly T[]) =>
  Object.fromEntries(reports.map((r) => [r.id, r]));

/** The whole inspect/forget story on one store. */
async function story(repository: IdempotentRepository): Promise<void> {
  const filled = Date.now();
  await fill(repository);
  const before = Date.now();
  const seen = byId<RecordReport>(await inspectRecords(repository, IDS));
  assert.equal(seen.conf?.state, 'confirmed');
  assert.equal(seen.conf?.fingerprint, 'fp-1');
  assert.equal(seen.conf?.resultKept, false);
  assert.ok((seen.conf?.expiresAt ?? 0) > before + DAY - 10 * MINUTE, 'the retention end is reported');
  assert.equal(seen.fly?.state, 'in-flight');
  assert.equal(seen.fly?.owner, 'worker-1');
  assert.ok((seen.fly?.leaseExpiresAt ?? 0) > before, 'the lease end is reported');
  for (const id of ['conf', 'fly'] as const) {
    const at = seen[id]?.firstSeenAt ?? 0;
    assert.ok(
      at >= filled - 10 * MINUTE && at <= before + MINUTE,
      `the first-seen time of ${id} is reported`,
    );
  }
  assert.equal(seen.fail?.state, 'failed-kept');
  assert.equal(seen.fail?.resultKind, 'failure');
  assert.equal(seen.val?.state, 'confirmed');
  assert.equal(seen.val?.resultKept, true);
  assert.equal(seen.val?.resultBytes, VALUE.length);
  assert.equal(seen.val?.result, undefined, 'no result content unless asked for');
  assert.equal(seen.fail?.owner, undefined, 'a confirmed record has no owner');
  assert.deepEqual(seen.never, { id: 'never', state: 'absent', resultKept: false });
  assert.equal(seen['0102ff']?.state, 'confirmed', 'a binary id is found by its hex bytes');

  // idem stats: every store here lists its ids (the optional scan); later, all of them have expired.
  const stats = await storeStats(repository);
  assert.equal(stats.held, 5);
  assert.deepEqual(stats.byState, { 'in-flight': 1, confirmed: 3, 'failed-kept': 1 });
  assert.equal(stats.expired, 0);
  assert.ok((stats.oldestExpiry ?? 0) > before && (stats.oldestExpiry ?? 0) <= (stats.newestExpiry ?? 0));
  assert.ok((stats.oldestFirstSeen ?? 0) >= filled - 10 * MINUTE, 'the oldest first-seen time');
  assert.ok(
    (stats.oldestFirstSeen ?? 0) <= (stats.newestFirstSeen ?? 0) &&
      (stats.newestFirstSeen ?? 0) <= before + MINUTE,
  );
  assert.equal(stats.firstSeenUnknown, undefined, 'every record has its first-seen time');
  const later = await storeStats(repository, Date.now() + 2 * DAY);
  assert.deepEqual([later.held, later.expired, later.oldestExpiry], [0, 5, undefined]);

  const shown = byId<RecordReport>(await inspectRecords(repository, IDS, { showResult: true }));
  assert.equal(shown.val?.result, VALUE);
  assert.equal(shown.fail?.result, FAILURE);

  const first = byId<ForgetReport>(await forgetRecords(repository, IDS));
  assert.deepEqual(first.conf, { id: 'conf', outcome: 'removed', was: 'confirmed' });
  assert.deepEqual(first.fail, { id: 'fail', outcome: 'removed', was: 'failed-kept' });
  assert.deepEqual(first.fly, { id: 'fly', outcome: 'in-flight', was: 'in-flight' });
  assert.deepEqual(first.never, { id: 'never', outcome: 'absent' });
  assert.equal(first['0102ff']?.outcome, 'removed');
  assert.equal(await repository.contains('fly'), true, 'an in-flight claim is kept without force');
  for (const id of ['conf', 'fail', 'val']) assert.equal(await repository.contains(id), false, id);
  assert.equal(await repository.contains(Buffer.from([1, 2, 255])), false);
  // Forgotten means processed again: the next claim of the id succeeds.
  assert.equal((await repository.add('conf', { ttlMs: DAY })).added, true);

  const forced = byId<ForgetReport>(await forgetRecords(repository, parseIds(['fly']), { force: true }));
  assert.deepEqual(forced.fly, { id: 'fly', outcome: 'removed', was: 'in-flight' });
  assert.equal(await repository.contains('fly'), false);
}

/** How each store is opened for the story, under names of its own, and emptied after it. */
const stores: { name: string; skip: false | string; open: () => Promise<IdempotentRepository> }[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});
const shared = (name: StoreName, open: () => Promise<IdempotentRepository>) =>
  stores.push({ name, skip: skipUnlessEnabled(name), open });

shared('redis', () =>
  RedisRepository.open({ url: endpoints.redisUrl, keyPrefix: `idem-test:records:${randomUUID()}:` }),
);
shared('dynamodb', async () => {
  const table = `idem-records-${randomUUID().slice(0, 8)}`;
  const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
  cleanups.push(async () => {
    const client = new DynamoDBClient({
      region: 'us-east-1',
      endpoint: endpoints.dynamodbEndpoint,
      credentials,
    });
    await client.send(new DeleteTableCommand({ TableName: table })).catch(() => undefined);
    client.destroy();
  });
  return DynamoDbRepository.open({
    table,
    createTable: true,
    endpoint: endpoints.dynamodbEndpoint,
    region: 'us-east-1',
    credentials,
  });
});
shared('cassandra', () =>
  CassandraRepository.open({
    contactPoints: [...endpoints.cassandraContactPoints],
    keyspace: 'idem_test',
    table: 'contract_ids',
    createSchema: true,
    namespace: `records-${randomUUID().slice(0, 8)}`,
  }),
);
shared('kafka', async () => {
  const topic = `idem-records-${randomUUID().slice(0, 12)}`;
  cleanups.push(async () => {
    const admin = new Kafka({ brokers: [...endpoints.kafkaBrokers], logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });
  return KafkaRepository.open({ brokers: [...endpoints.kafkaBrokers], topic, replicationFactor: 1 });
});
shared('postgres', async () => {
  const table = postgresTable('records');
  cleanups.push(await createPostgresTable(table));
  return PostgresRepository.open({ url: endpoints.postgresUrl, table });
});
shared('mysql', async () => {
  const table = mysqlTable('records');
  cleanups.push(await createMysqlTable(table));
  return MySqlRepository.open({ url: endpoints.mysqlUrl, table });
});

describe('inspect and forget, every store through the repository interface', () => {
  it('memory', async () => {
    const repository = new MemoryRepository();
    await story(repository);
    await repository.close();
  });

  it('a record of an older version has no first-seen time: inspect says null, stats counts it unknown', async () => {
    const repository = new MemoryRepository();
    repository.localRecords.put('old', { id: 'old', state: 'confirmed', expiresAt: Date.now() + DAY });
    await repository.add('new', { ttlMs: DAY });
    const [old, fresh] = await inspectRecords(repository, parseIds(['old', 'new']));
    assert.equal(old?.firstSeenAt, null);
    assert.equal(typeof fresh?.firstSeenAt, 'number');
    const stats = await storeStats(repository);
    assert.equal(stats.firstSeenUnknown, 1);
    assert.equal(stats.oldestFirstSeen, fresh?.firstSeenAt);
    await repository.close();
  });

  for (const store of stores) {
    it(store.name, { skip: store.skip }, async () => {
      const repository = await store.open();
      try {
        await story(repository);
      } finally {
        await repository.clear().catch(() => undefined);
        await repository.close();
      }
    });
  }

  it('forget --force removes a claim only under the owner it read', async () => {
    const repository = new MemoryRepository();
    await repository.add('taken', { ttlMs: DAY, leaseMs: MINUTE, owner: 'w1' });
    // Between forget's read and its remove, the claim's owner confirms it: the confirmed record must stay.
    const racing = {
      getMany: async (...args: Parameters<IdempotentRepository['getMany']>) => {
        const records = await repository.getMany(...args);
        await repository.confirm({ id: 'taken', owner: 'w1' }, { ttlMs: DAY });
        return records;
      },
      remove: (...args: Parameters<IdempotentRepository['remove']>) => repository.remove(...args),
    } as unknown as IdempotentRepository;
    const [report] = await forgetRecords(racing, parseIds(['taken']), { force: true });
    assert.deepEqual(report, { id: 'taken', outcome: 'changed', was: 'in-flight' });
    assert.equal((await repository.get('taken'))?.state, 'confirmed', 'the confirmed record was kept');
  });

  it('an id listed twice is answered once', async () => {
    const repository = new MemoryRepository();
    await repository.add('twice', { ttlMs: DAY });
    const reports = await forgetRecords(repository, parseIds(['twice', 'twice']));
    assert.deepEqual(reports, [{ id: 'twice', outcome: 'removed', was: 'confirmed' }]);
  });

  it('parseIds refuses what no store can hold, naming the id and the format', () => {
    assert.throws(() => parseIds(['zz'], 'hex'), /id "zz": is not hex .*--id-format hex/);
    assert.throws(() => parseIds(['a b'], 'base64'), /id "a b": is not base64 .*--id-format base64/);
    assert.throws(() => parseIds(['x'.repeat(2000)]), /is 2000 bytes, the limit is 1024/);
  });
});

describe('idem inspect / idem forget through the binary (RocksDB)', {
  skip: skipUnlessEnabled('rocksdb'),
}, () => {
  let dir: string;
  let store: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-records-'));
    store = join(dir, 'store');
    const input = join(dir, 'in.ndjson');
    await writeFile(input, '{"id":"a"}\n{"id":"b"}\n{"id":"c"}\n');
    const dedup = await runCli(['dedup', '--id', 'id', '--store', store, '--no-progress', input]);
    assert.equal(dedup.code, 0, dedup.stderr);
    // An in-flight claim, as a crashed or running eager worker leaves it.
    const repository = await RocksdbRepository.open({ path: store });
    await repository.add('busy', { ttlMs: DAY, leaseMs: 10 * MINUTE, owner: 'worker-9' });
    await repository.close();
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('inspect prints one line per id, NDJSON with --json, and exits 0', async () => {
    const text = await runCli(['inspect', '--store', store, 'a', 'busy', 'zzz']);
    assert.equal(text.code, 0, text.stderr);
    const lines = text.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 3);
    assert.match(
      lines[0] as string,
      /^a {2}confirmed; expires \d{4}-\d\d-\d\dT.*Z; first seen \d{4}-.*Z; no result kept$/,
    );
    assert.match(lines[1] as string, /^busy {2}in-flight; owner worker-9; lease until .*Z; expires/);
    assert.equal(lines[2], 'zzz  absent');
    assert.match(text.stderr, /1 confirmed, 1 in-flight, 1 absent; store .* \(RocksDB\)/);

    const json = await runCli(['inspect', '--store', store, '--json', 'a', 'zzz']);
    assert.equal(json.code, 0, json.stderr);
    const [a, zzz] = json.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(a.state, 'confirmed');
    assert.ok(!Number.isNaN(Date.parse(a.expiresAt)), 'times are ISO 8601');
    assert.equal(new Date(a.firstSeenAt).toISOString(), a.firstSeenAt, 'first seen is ISO 8601');
    assert.deepEqual(zzz, { id: 'zzz', state: 'absent', resultKept: false });
  });

  it('forget --ids FILE removes confirmed ids, keeps an in-flight one (exit 1), then --force removes it', async () => {
    const file = join(dir, 'ids.txt');
    await writeFile(file, 'a\r\nbusy\n\nnope\n');
    const first = await runCli(['forget', '--store', store, '--ids', file, 'b']);
    assert.equal(first.code, 1, first.stderr);
    assert.match(first.stdout, /^a {2}removed \(was confirmed\)$/m);
    assert.match(first.stdout, /^busy {2}kept: in-flight.*--force/m);
    assert.match(first.stdout, /^nope {2}absent/m);
    assert.match(first.stdout, /^b {2}removed/m);
    assert.match(first.stderr, /2 removed, 1 in-flight, 1 absent/);

    const forced = await runCli(['forget', '--store', store, '--force', '--json', 'busy']);
    assert.equal(forced.code, 0, forced.stderr);
    assert.deepEqual(JSON.parse(forced.stdout), { id: 'busy', outcome: 'removed', was: 'in-flight' });

    const after = await runCli(['inspect', '--store', store, 'a', 'b', 'c', 'busy']);
    assert.deepEqual(
      after.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split('  ')[1]?.split(';')[0]),
      ['absent', 'absent', 'confirmed', 'absent'],
    );
    // Processed again: a dedup run writes the forgotten lines and still drops c.
    const input = join(dir, 'again.ndjson');
    await writeFile(input, '{"id":"a"}\n{"id":"c"}\n');
    const dedup = await runCli(['dedup', '--id', 'id', '--store', store, '--no-progress', input]);
    assert.equal(dedup.stdout, '{"id":"a"}\n');
  });

  it('stats counts a RocksDB store by state, leaving removed ids out (exit 0), and --json', async () => {
    // A store of its own: the tests above change theirs. Every state, a removed id, and a binary id.
    const path = join(dir, 'stats-store');
    const repository = await RocksdbRepository.open({ path });
    await fill(repository);
    await repository.add('gone', { ttlMs: DAY });
    assert.equal(await repository.remove('gone'), true);
    await repository.close();

    const text = await runCli(['stats', '--store', path]);
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      /^ids held: 5\n {2}in-flight {4}1\n {2}confirmed {4}3\n {2}failed-kept {2}1\nexpired, not yet removed: 0\n/,
    );
    assert.match(
      text.stdout,
      /^oldest expiry: \d{4}-.*Z\nnewest expiry: \d{4}-.*Z\noldest first seen: \d{4}-.*Z\nnewest first seen: \d{4}-.*Z\n$/m,
    );
    assert.match(text.stderr, /^idem stats: store .*stats-store \(RocksDB\)/m);

    const json = await runCli(['stats', '--store', path, '--json']);
    assert.equal(json.code, 0, json.stderr);
    const parsed = JSON.parse(json.stdout);
    assert.equal(parsed.held, 5);
    assert.deepEqual(parsed.byState, { 'in-flight': 1, confirmed: 3, 'failed-kept': 1 });
    assert.equal(parsed.expired, 0);
    assert.ok(parsed.oldestFirstSeen <= parsed.newestFirstSeen, 'first-seen range as ISO 8601 text');
    assert.equal(parsed.firstSeenUnknown, undefined);
  });

  it('bad input is a usage error (exit 2) naming the flag', async () => {
    const cases: [string[], RegExp][] = [
      [['inspect', 'a'], /^idem inspect: --store: is required/],
      [['inspect', '--store', store], /^idem inspect: --ids: no ids/],
      [['forget', '--store', store, '--id-format', 'hex', 'zz'], /id "zz": is not hex .*--id-format hex/],
      [['inspect', '--store', store, '--id-format', 'octal', 'a'], /'--id-format <format>' argument 'octal'/],
      [['forget', '--store', store, '--ids', join(dir, 'missing.txt')], /--ids: cannot read .*ENOENT/],
      [['inspect', '--store', join(dir, 'no-such-store'), 'a'], /--store: no RocksDB store at /],
      [['inspect', '--stor', store, 'a'], /unknown option '--stor' \(did you mean --store\?\)/],
      [['forget', '--store', 'memory', 'a'], /--store: "memory" holds nothing/],
    ];
    for (const [args, expected] of cases) {
      const result = await runCli(args);
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, expected, args.join(' '));
      assert.equal(result.stderr.trimEnd().split('\n').length, 1, `one line: ${result.stderr}`);
      assert.equal(result.stdout, '');
    }
  });
});
