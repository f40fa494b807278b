/*
 * Choosing the Kafka client (issue 21): `kafka.client` in the node's TOML, `client` on the Kafka adapter and the
 * `kafka` repository, all resolved by the port's one factory (src/kafka/port/open.ts).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { Kafka } from 'kafkajs';
import { type KafkaRecord, kafkaRecordId, runIdempotentConsumer } from '../../src/adapters/kafka/index.js';
import { resolveKafkaAdapterOptions } from '../../src/adapters/kafka/options.js';
import { loadConfig } from '../../src/config/load.js';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { ConfigError } from '../../src/errors.js';
import { openKafkaClient } from '../../src/kafka/port/index.js';
import { platformaticInstallCommand } from '../../src/kafka/port/open.js';
import { nodeConfigSchema } from '../../src/node/options.js';
import { parseKafkaOptions } from '../../src/repositories/kafka/options.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { kafkaTestbed, onCleanup, produce, testProducer, waitForCommitted } from '../helpers/kafka.js';
import { runSource, SOURCE_NODE_BIN } from '../helpers/source-run.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const NODE_TOML = `[kafka]
brokers = ["${endpoints.kafkaBrokers[0]}"]
client = "kafkajs"
[input]
topic = "in"
[output]
topic = "out"
[dlq]
topic = "dlq"
[dedup]
id = "uid"
[repository]
type = "memory"
`;

const idempotent = () =>
  new IdempotentConsumer<KafkaRecord>({ repository: new MemoryRepository(), id: kafkaRecordId });

describe('choosing the Kafka client', () => {
  it('defaults to platformatic, whose transactions are fenced by the group (KIP-447)', async () => {
    const client = await openKafkaClient(
      {
        brokers: ['127.0.0.1:1'],
        clientId: 'x',
        ssl: false,
        connectionTimeout: 1_000,
        requestTimeout: 1_000,
      },
      { retries: 0 },
    );
    assert.equal(client.name, 'platformatic');
    assert.equal(client.capabilities.fencesByGroup, true);
    await client.close();
  });

  it('names the 1.x line of @platformatic/kafka to install where npm leaves it out (Node < 22.19)', () => {
    assert.equal(platformaticInstallCommand('20.20.2'), 'npm install @platformatic/kafka@^1.35.0');
    assert.equal(platformaticInstallCommand('22.18.0'), 'npm install @platformatic/kafka@^1.35.0');
    assert.equal(platformaticInstallCommand('22.22.0'), 'npm install @platformatic/kafka');
    assert.equal(platformaticInstallCommand('24.6.0'), 'npm install @platformatic/kafka');
  });

  it('refuses an unknown client, naming kafka.client and repository.client', async () => {
    await assert.rejects(
      loadConfig(nodeConfigSchema, { text: NODE_TOML.replace('"kafkajs"', '"confluent"'), env: {} }),
      (error: unknown) => error instanceof ConfigError && /kafka\.client/.test(error.message),
    );
    assert.throws(
      () => parseKafkaOptions({ brokers: ['b:9092'], topic: 't', client: 'confluent' }),
      (error: unknown) => error instanceof ConfigError && error.key === 'repository.client',
    );
    const config = await loadConfig(nodeConfigSchema, { text: NODE_TOML, env: {} });
    assert.equal(config.kafka.client, 'kafkajs');
    const plain = await loadConfig(nodeConfigSchema, {
      text: NODE_TOML.replace(/^client = .*$/m, ''),
      env: {},
    });
    assert.equal(plain.kafka.client, 'platformatic');
  });

  it('a node on the default client without @platformatic/kafka: one line naming the package', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-client-'));
    onCleanup(t, () => rm(dir, { recursive: true, force: true }));
    const path = join(dir, 'node.toml');
    await writeFile(path, NODE_TOML.replace(/^client = .*$/m, ''));
    const { code, stderr } = await runSource(SOURCE_NODE_BIN, ['--config', path], {
      hidden: ['@platformatic/kafka'],
    });
    // The implementation's absence from a build is a config error (2); a missing package, exit 3.
    assert.ok(code === 2 || code === 3, `exit ${code}: ${stderr}`);
    assert.equal(stderr.split('\n').filter(Boolean).length, 1, stderr);
    // The message names the command itself, so it is printed once, not prefixed again ("idem node: idem node …").
    // On Node < 22.19 the command names the 1.x line (a plain install would take 2.x, which needs Node 22.22).
    assert.equal(
      stderr,
      `idem node needs the npm package "@platformatic/kafka", which is not installed: ${platformaticInstallCommand()}\n`,
    );
  });

  it('the adapter refuses another client for a kafkajs Kafka instance, naming client', () => {
    assert.throws(
      () =>
        resolveKafkaAdapterOptions({
          kafka: new Kafka({ brokers: ['127.0.0.1:1'] }),
          client: 'platformatic',
          topics: ['t'],
          groupId: 'g',
          idempotent: idempotent(),
          handler: () => undefined,
        }),
      (error: unknown) => error instanceof ConfigError && error.key === 'client',
    );
    assert.throws(
      () =>
        resolveKafkaAdapterOptions({
          kafka: { brokers: [] },
          topics: ['t'],
          groupId: 'g',
          idempotent: idempotent(),
          handler: () => undefined,
        }),
      (error: unknown) => error instanceof ConfigError && error.key === 'kafka.brokers',
    );
  });

  it('the adapter builds its own client from connection settings', {
    skip: skipUnlessEnabled('kafka'),
  }, async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t, { partitions: 1 });
    await produce(await testProducer(t, kafka), topic, [
      { key: 'a', value: '1' },
      { key: 'b', value: '2' },
      { key: 'a', value: '3' },
    ]);
    const handled: string[] = [];
    const runner = await runIdempotentConsumer({
      kafka: { brokers: [...endpoints.kafkaBrokers], clientId: 'idem-test-settings' },
      client: 'kafkajs',
      topics: [topic],
      groupId,
      fromBeginning: true,
      idempotent: idempotent(),
      handler: (record) => {
        handled.push(`${record.id}@${record.message.value?.toString()}`);
      },
    });
    onCleanup(t, () => runner.stop());
    await waitForCommitted(admin, groupId, topic);
    assert.deepEqual(handled, ['a@1', 'b@2']);
    assert.ok(runner.consumer, 'a client built on kafkajs exposes its kafkajs consumer');
  });
});
