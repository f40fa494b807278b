/*
 * One vocabulary across stores: every store's entry point exports `<Store>Repository` with the factory verb
 * `open`, `<store>OptionsSchema`, `<store>Defaults`, `parse<Store>Options` (parsed options `<Store>Options`, input
 * `<Store>RepositoryOptions`), and its folder holds the same files for the same roles. The names of 0.1 stay
 * as deprecated aliases.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type * as cassandraEntry from '../../src/repositories/cassandra/index.js';
import type * as dynamodbEntry from '../../src/repositories/dynamodb/index.js';
import type * as kafkaEntry from '../../src/repositories/kafka/index.js';
import { repositoryTypes } from '../../src/repositories/registry.js';
import type * as rocksdbEntry from '../../src/repositories/rocksdb/index.js';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src/repositories');

const names: Record<string, { store: string; folder: string }> = {
  rocksdb: { store: 'Rocksdb', folder: 'rocksdb' },
  memory: { store: 'Memory', folder: 'memory' },
  redis: { store: 'Redis', folder: 'redis' },
  dynamodb: { store: 'DynamoDb', folder: 'dynamodb' },
  cassandra: { store: 'Cassandra', folder: 'cassandra' },
  kafka: { store: 'Kafka', folder: 'kafka' },
  postgres: { store: 'Postgres', folder: 'postgres' },
  mysql: { store: 'MySql', folder: 'mysql' },
};

// Type-level: the new names exist and the deprecated ones are the same types.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const typeAliases: [
  Same<dynamodbEntry.DynamoDbConfig, dynamodbEntry.DynamoDbOptions>,
  Same<rocksdbEntry.RocksdbSettings, rocksdbEntry.RocksdbOptions>,
  Same<cassandraEntry.CassandraConnectExtras, cassandraEntry.CassandraOpenExtras>,
  Same<kafkaEntry.KafkaOptions, ReturnType<typeof kafkaEntry.parseKafkaOptions>>,
] = [true, true, true, true];

describe('one vocabulary across stores', () => {
  it('covers every repository.type', () => {
    assert.deepEqual(Object.keys(names).sort(), [...repositoryTypes].sort());
    assert.ok(typeAliases.every(Boolean));
  });

  for (const [type, { store, folder }] of Object.entries(names)) {
    const lower = store[0]?.toLowerCase() + store.slice(1).toLowerCase();
    it(`${type}: ${store}Repository.open, ${lower}OptionsSchema, ${lower}Defaults, parse${store}Options`, async () => {
      const entry = (await import(`../../src/repositories/${folder}/index.js`)) as Record<string, unknown>;
      const repository = entry[`${store}Repository`] as { open?: unknown } | undefined;
      assert.equal(typeof repository?.open, 'function', `${store}Repository.open`);
      assert.ok(entry[`${lower}OptionsSchema`], `${lower}OptionsSchema`);
      assert.equal(typeof entry[`${lower}Defaults`], 'object', `${lower}Defaults`);
      assert.equal(typeof entry[`parse${store}Options`], 'function', `parse${store}Options`);
      const module = entry.repositoryModule as { type: string; optionsSchema: unknown };
      assert.equal(module.type, type);
      assert.equal(module.optionsSchema, entry[`${lower}OptionsSchema`]);
    });

    it(`${type}: index.ts, options.ts and ${folder}-repository.ts`, () => {
      for (const file of ['index.ts', 'options.ts', `${folder}-repository.ts`]) {
        assert.ok(existsSync(join(SRC, folder, file)), `${folder}/${file}`);
      }
    });
  }

  it('the 0.1 names stay as deprecated aliases', async () => {
    const dynamodb = await import('../../src/repositories/dynamodb/index.js');
    assert.equal(dynamodb.parseDynamoDbConfig, dynamodb.parseDynamoDbOptions);
    const kafka = await import('../../src/repositories/kafka/index.js');
    assert.equal(kafka.kafkaRepositoryDefaults, kafka.kafkaDefaults);
    const cassandra = await import('../../src/repositories/cassandra/index.js');
    assert.equal(typeof cassandra.CassandraRepository.connect, 'function');
  });

  it('the memory store opens like the others', async () => {
    const { MemoryRepository } = await import('../../src/repositories/memory/index.js');
    const repository = await MemoryRepository.open({ maxEntries: 10 });
    assert.ok(repository instanceof MemoryRepository);
    assert.equal((await repository.add('a', { ttlMs: 60_000 })).added, true);
    await repository.close();
  });

  it('a client-connecting store keeps its client code in connection.ts', () => {
    for (const folder of ['redis', 'cassandra', 'postgres', 'mysql'])
      assert.ok(existsSync(join(SRC, folder, 'connection.ts')), folder);
    for (const folder of ['redis', 'dynamodb'])
      assert.ok(existsSync(join(SRC, folder, 'server-time.ts')), folder);
  });
});
