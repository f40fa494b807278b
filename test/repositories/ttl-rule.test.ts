import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { IdempotentConsumer } from '../../src/consumer/idempotent-consumer.js';
import { ConfigError } from '../../src/errors.js';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { repositoryModule as dynamodb } from '../../src/repositories/dynamodb/index.js';
import { KafkaRepository } from '../../src/repositories/kafka/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import type { FastPath } from '../../src/store/single-key.js';
import { MAX_TTL_MS } from '../../src/store/ttl.js';
import { endpoints, type StoreName, skipUnlessEnabled } from '../helpers/stores.js';

// One rule for every store and entry point: a TTL or lease that is not a finite duration above 0 within the
// store's maximum is refused, naming the option, before anything is stored.

const table = `idem-ttl-rule-${randomUUID().slice(0, 8)}`;
const dynamoConnection = {
  table,
  endpoint: endpoints.dynamodbEndpoint,
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
};
let dynamoCreated = false;
after(async () => {
  if (!dynamoCreated) return;
  const client = new DynamoDBClient({ region: 'us-east-1', ...dynamoConnection });
  await client.send(new DeleteTableCommand({ TableName: table })).catch(() => {});
  client.destroy();
});

const stores: {
  name: string;
  skip: false | string;
  open: (t: TestContext) => Promise<FastPath>;
}[] = [
  { name: 'memory', skip: false, open: async () => new MemoryRepository() },
  {
    name: 'rocksdb',
    skip: skipUnlessEnabled('rocksdb'),
    open: async (t) => {
      const dir = await mkdtemp(join(tmpdir(), 'idem-ttl-rule-'));
      const repository = await RocksdbRepository.open({ path: join(dir, 'store') });
      t.after(async () => {
        await repository.close();
        await rm(dir, { recursive: true, force: true });
      });
      return repository;
    },
  },
  {
    name: 'redis',
    skip: skipUnlessEnabled('redis'),
    open: () =>
      RedisRepository.open({ url: endpoints.redisUrl, keyPrefix: `idem-ttl-rule:${randomUUID()}:` }),
  },
  {
    name: 'dynamodb',
    skip: skipUnlessEnabled('dynamodb'),
    open: async () => {
      const repo = await dynamodb.create(
        dynamodb.optionsSchema.parse({
          ...dynamoConnection,
          createTable: !dynamoCreated,
          keyPrefix: `${randomUUID()}:`,
        }),
      );
      dynamoCreated = true;
      return repo;
    },
  },
  {
    name: 'cassandra',
    skip: skipUnlessEnabled('cassandra' satisfies StoreName),
    open: () =>
      CassandraRepository.connect({
        contactPoints: [...endpoints.cassandraContactPoints],
        keyspace: 'idem_test',
        table: 'ttl_rule_ids',
        createSchema: true,
        namespace: randomUUID(),
      }),
  },
  {
    name: 'kafka repository',
    skip: skipUnlessEnabled('kafka'),
    open: () =>
      KafkaRepository.open({
        brokers: [...endpoints.kafkaBrokers],
        topic: `idem-ttl-rule-${randomUUID()}`,
        replicationFactor: 1,
      }),
  },
];

const BAD = [Number.NaN, Number.POSITIVE_INFINITY, 0, -5, 1e30];

for (const store of stores) {
  describe(`TTL rule on ${store.name}`, { skip: store.skip }, () => {
    it('refuses a TTL or lease that is NaN, infinite, not above 0 or above the maximum, storing nothing', async (t) => {
      const repository = await store.open(t);
      t.after(async () => {
        if (repository.capabilities.persistent) await repository.clear().catch(() => undefined);
        await repository.close();
      });
      const max = Math.min(repository.capabilities.maxTtlMs ?? MAX_TTL_MS, MAX_TTL_MS);
      for (const bad of [...BAD, max + 1]) {
        const id = `ttl-${randomUUID()}`;
        const refused = (option: string) => (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.match(error.message, new RegExp(`option ${option} of `));
          assert.match(error.message, /finite number of milliseconds greater than 0/);
          assert.equal(error.retryable, false);
          return true;
        };
        await assert.rejects(repository.add(id, { ttlMs: bad }), refused('ttlMs'));
        await assert.rejects(repository.addMany([{ id }], { ttlMs: bad }), refused('ttlMs'));
        await assert.rejects(
          repository.add(id, { ttlMs: 60_000, leaseMs: bad, owner: 'o' }),
          refused('leaseMs'),
        );
        if (repository.markMany) {
          await assert.rejects(repository.markMany([{ id }], { ttlMs: bad }), refused('ttlMs'));
        }
        assert.equal(await repository.get(id), undefined, `nothing stored for ${bad}`);
        const claimed = await repository.add(id, { ttlMs: 60_000, leaseMs: 60_000, owner: 'o' });
        assert.equal(claimed.added, true);
        await assert.rejects(repository.confirm({ id, owner: 'o' }, { ttlMs: bad }), refused('ttlMs'));
        await assert.rejects(repository.confirmMany([{ id, owner: 'o' }], { ttlMs: bad }), refused('ttlMs'));
        assert.equal((await repository.get(id))?.state, 'in-flight');
      }
    });

    it('the single-key fast paths, renew and minLifetimeMs follow the same rule', async (t) => {
      const repository = await store.open(t);
      t.after(async () => {
        if (repository.capabilities.persistent) await repository.clear().catch(() => undefined);
        await repository.close();
      });
      const max = Math.min(repository.capabilities.maxTtlMs ?? MAX_TTL_MS, MAX_TTL_MS);
      const claim = { ttlMs: 60_000, leaseMs: 60_000, owner: 'o' };
      for (const bad of [...BAD, max + 1]) {
        const id = `ttl-${randomUUID()}`;
        // A direct verb of a store that answers at once throws rather than rejects: the async wrapper takes both.
        const refused = async (option: string, call: () => unknown, verb: string) =>
          assert.rejects(
            async () => call(),
            (error: unknown) => {
              assert.ok(error instanceof ConfigError, `${verb} with ${option} ${bad}: ${String(error)}`);
              assert.match(error.message, new RegExp(`option ${option} of `));
              assert.equal(error.retryable, false);
              return true;
            },
            `${verb} accepted ${option} ${bad}`,
          );
        await refused(
          'minLifetimeMs',
          () => repository.add(id, { ttlMs: 60_000, minLifetimeMs: bad }),
          'add',
        );
        await refused(
          'minLifetimeMs',
          () => repository.addMany([{ id }], { ttlMs: 60_000, minLifetimeMs: bad }),
          'addMany',
        );
        if (repository.markMany) {
          await refused(
            'minLifetimeMs',
            () => repository.markMany?.([{ id }], { ttlMs: 60_000, minLifetimeMs: bad }),
            'markMany',
          );
        }
        if (repository.addDirect) {
          await refused('ttlMs', () => repository.addDirect?.(id, { ttlMs: bad }), 'addDirect');
          await refused('leaseMs', () => repository.addDirect?.(id, { ...claim, leaseMs: bad }), 'addDirect');
        }
        if (repository.markDirect) {
          await refused('ttlMs', () => repository.markDirect?.({ id }, { ttlMs: bad }), 'markDirect');
          await refused(
            'minLifetimeMs',
            () => repository.markDirect?.({ id }, { ttlMs: 60_000, minLifetimeMs: bad }),
            'markDirect',
          );
        }
        assert.equal(await repository.get(id), undefined, `nothing stored for ${bad}`);
        assert.equal((await repository.add(id, claim)).added, true);
        if (repository.confirmDirect) {
          await refused(
            'ttlMs',
            () => repository.confirmDirect?.({ id, owner: 'o' }, { ttlMs: bad }),
            'confirmDirect',
          );
        }
        if (repository.renew) {
          await refused('leaseMs', () => repository.renew?.({ id, owner: 'o' }, { leaseMs: bad }), 'renew');
        }
        const held = await repository.get(id);
        assert.equal(held?.state, 'in-flight');
        assert.ok(
          (held?.leaseExpiresAt ?? 0) <= Date.now() + claim.leaseMs,
          'a refused renew moved the lease',
        );
      }
    });

    it('the consumer refuses such a TTL when it is built', async (t) => {
      const repository = await store.open(t);
      t.after(() => repository.close());
      for (const bad of [...BAD, MAX_TTL_MS + 1]) {
        assert.throws(
          () => new IdempotentConsumer({ repository, id: 'id', ttlMs: bad }),
          (error: unknown) => error instanceof ConfigError && /option ttlMs of/.test(error.message),
        );
        assert.throws(
          () => new IdempotentConsumer({ repository, id: 'id', leaseMs: bad }),
          (error: unknown) => error instanceof ConfigError && /option leaseMs of/.test(error.message),
        );
      }
    });
  });
}
