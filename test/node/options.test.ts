import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';
import type { KafkaClient } from '../../src/kafka/port/index.js';
import { startDedupNode } from '../../src/node/dedup-node.js';
import { nodeConfigSchema, nodeDefaults } from '../../src/node/options.js';
import { LoggedRepository, MemoryChangelog } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { runSource, SOURCE_NODE_BIN } from '../helpers/source-run.js';

const EXAMPLE = fileURLToPath(new URL('../../examples/node.toml', import.meta.url));
const MINIMAL = `
[kafka]
brokers = ["127.0.0.1:9092"]
[input]
topic = "in"
[output]
topic = "out"
[dlq]
topic = "dlq"
[dedup]
id = "uid"
[repository]
path = "/tmp/store"
`;

describe('dedup node config', () => {
  it('reads the example file', async () => {
    const config = await loadConfig(nodeConfigSchema, { path: EXAMPLE, env: {} });
    assert.equal(config.input.topic, 'raw_event');
    assert.deepEqual(config.dedup.id, { from: 'value', path: 'uid' });
    assert.equal(config.dedup.window, 3 * 3_600_000);
    assert.equal(config.repository.type, 'rocksdb');
  });

  it('fills the defaults', async () => {
    const config = await loadConfig(nodeConfigSchema, { text: MINIMAL, env: {} });
    assert.equal(config.input.batchSize, nodeDefaults.batchSize);
    assert.equal(config.input.groupId, nodeDefaults.groupId);
    assert.equal(config.kafka.ssl, false);
    assert.deepEqual(config.metrics, { enabled: true, port: 8000, host: '127.0.0.1' });
    assert.equal(config.perf.interval, 10_000);
    assert.equal(config.dedup.missingId, 'dlq');
    assert.equal(config.dedup.storeFailure, 'fail');
  });

  it('takes IDEM__SECTION__KEY overrides over the file', async () => {
    const config = await loadConfig(nodeConfigSchema, {
      text: MINIMAL,
      env: {
        IDEM__METRICS__ENABLED: 'false',
        IDEM__METRICS__PORT: '9100',
        IDEM__KAFKA__BROKERS: 'a:9092,b:9092',
        IDEM__INPUT__BATCH_SIZE: '250',
        IDEM__DEDUP__WINDOW: '30m',
        IDEM__DEDUP__ID: 'meta.id',
        IDEM__KAFKA__SASL__MECHANISM: 'plain',
        IDEM__KAFKA__SASL__USERNAME: 'u',
        IDEM__KAFKA__SASL__PASSWORD: 'p',
        IDEM__KAFKA__SSL: 'true',
      },
    });
    assert.equal(config.metrics.enabled, false);
    assert.equal(config.metrics.port, 9100);
    assert.deepEqual(config.kafka.brokers, ['a:9092', 'b:9092']);
    assert.equal(config.input.batchSize, 250);
    assert.equal(config.dedup.window, 1_800_000);
    assert.deepEqual(config.dedup.id, { from: 'value', path: 'meta.id' });
    assert.deepEqual(config.kafka.sasl, {
      mechanism: 'plain',
      username: 'u',
      password: 'p',
      allowPlaintext: false,
    });
  });

  it('refuses SASL without TLS, naming the keys that fix it', async () => {
    const sasl =
      '[kafka]\nbrokers = ["b:9092"]\nsasl = { mechanism = "plain", username = "u", password = "p" }\n';
    const text = MINIMAL.replace('[kafka]\nbrokers = ["127.0.0.1:9092"]\n', sasl);
    await assert.rejects(
      loadConfig(nodeConfigSchema, { path: 'node.toml', text, env: {} }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(
          error.message,
          'node.toml:4: kafka.sasl: SASL without TLS sends the login and every record unencrypted; set ' +
            'kafka.ssl = true (or a table with ca = ...), or kafka.sasl.allowPlaintext = true if the network is trusted',
        );
        return true;
      },
    );
    // Said explicitly, in the file or from the environment: accepted.
    const allowed = await loadConfig(nodeConfigSchema, {
      text,
      env: { IDEM__KAFKA__SASL__ALLOW_PLAINTEXT: 'true' },
    });
    assert.equal(allowed.kafka.sasl?.allowPlaintext, true);
    const overTls = await loadConfig(nodeConfigSchema, { text, env: { IDEM__KAFKA__SSL: 'true' } });
    assert.equal(overTls.kafka.ssl, true);
  });

  it('takes the id from the key or a header', async () => {
    const key = await loadConfig(nodeConfigSchema, {
      text: MINIMAL.replace('id = "uid"', 'id = { from = "key" }'),
      env: {},
    });
    assert.deepEqual(key.dedup.id, { from: 'key' });
  });

  it('names the key of a bad value', async () => {
    await assert.rejects(
      loadConfig(nodeConfigSchema, { text: MINIMAL.replace('topic = "in"', ''), env: {} }),
      (error: unknown) => error instanceof ConfigError && /input\.topic/.test(error.message),
    );
    await assert.rejects(
      loadConfig(nodeConfigSchema, { text: MINIMAL, env: { IDEM__INPUT__BATCH_SIZE: '0' } }),
      (error: unknown) => error instanceof ConfigError && /IDEM__INPUT__BATCH_SIZE/.test(error.message),
    );
  });

  it('refuses a changelog topic shared with the input, output, DLQ or duplicates audit, naming the key', async () => {
    const refused = async (env: Record<string, string>, key: string, message: RegExp) =>
      assert.rejects(loadConfig(nodeConfigSchema, { text: MINIMAL, env }), (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, key);
        assert.match(error.message, message);
        return true;
      });
    // Audit records are keyed by the dedup id like the marks: compaction would replace a mark with one.
    await refused(
      { IDEM__CHANGELOG__ENABLED: 'true', IDEM__OUTPUT__DUPLICATES_TOPIC: 'idem-dedup-out-changelog' },
      'output.duplicatesTopic',
      /output\.duplicatesTopic: topic "idem-dedup-out-changelog" is also the changelog topic/,
    );
    await refused(
      {
        IDEM__OUTPUT__GUARANTEE: 'exactly-once',
        IDEM__CHANGELOG__TOPIC: 'audit',
        IDEM__OUTPUT__DUPLICATES_TOPIC: 'audit',
      },
      'output.duplicatesTopic',
      /output\.duplicatesTopic: topic "audit" is also the changelog topic/,
    );
    for (const [topic, key] of [
      ['in', 'input.topic'],
      ['out', 'output.topic'],
      ['dlq', 'dlq.topic'],
    ] as const) {
      await refused(
        { IDEM__CHANGELOG__ENABLED: 'true', IDEM__CHANGELOG__TOPIC: topic },
        'changelog.topic',
        new RegExp(`changelog\\.topic: topic "${topic}" is also ${key.replace('.', '\\.')}`),
      );
    }
    // Without a changelog the name is unused, so nothing clashes.
    const off = await loadConfig(nodeConfigSchema, {
      text: MINIMAL,
      env: { IDEM__OUTPUT__DUPLICATES_TOPIC: 'idem-dedup-out-changelog' },
    });
    assert.equal(off.output.duplicatesTopic, 'idem-dedup-out-changelog');
  });

  it('refuses a dedup.window past the TTL rule, naming it (it was accepted, then failed on the changelog topic)', async () => {
    for (const window of ['99999999999999d', '36501d']) {
      await assert.rejects(
        loadConfig(nodeConfigSchema, { text: MINIMAL, env: { IDEM__DEDUP__WINDOW: window } }),
        (error: unknown) =>
          error instanceof ConfigError &&
          /dedup\.window: must be at most 3153600000000 ms \(36500 days\)/.test(error.message),
      );
    }
    const config = await loadConfig(nodeConfigSchema, { text: MINIMAL, env: { IDEM__DEDUP__WINDOW: '2m' } });
    // A store that keeps marks for 1 minute only: refused before any topic is created or checked.
    const inner = new MemoryRepository();
    const store = new LoggedRepository(inner, new MemoryChangelog(), {
      capabilities: { ...inner.capabilities, maxTtlMs: 60_000 },
    });
    const touched: string[] = [];
    const kafka = new Proxy({} as KafkaClient, {
      get: (_target, name) => () => {
        touched.push(String(name));
        throw new Error(`kafka.${String(name)} called`);
      },
    });
    await assert.rejects(
      startDedupNode(config, store, pino({ enabled: false }), { kafka }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /^dedup\.window: .*at most 60000 .*the maximum of the rocksdb store\), got 120000$/.test(
          error.message,
        ),
    );
    assert.deepEqual(touched, []);
    await store.close();
  });

  it('reads dedup.ttl and its older name dedup.window alike, and refuses both with different values', async () => {
    const load = (env: Record<string, string>) => loadConfig(nodeConfigSchema, { text: MINIMAL, env });
    const ttl = await load({ IDEM__DEDUP__TTL: '30m' });
    const window = await load({ IDEM__DEDUP__WINDOW: '30m' });
    assert.deepEqual(ttl.dedup, window.dedup);
    assert.equal(ttl.dedup.ttl, 1_800_000);
    assert.equal(
      (await load({ IDEM__DEDUP__TTL: '30m', IDEM__DEDUP__WINDOW: '1800s' })).dedup.ttl,
      1_800_000,
    );
    assert.equal((await load({})).dedup.ttl, nodeDefaults.ttlMs);
    await assert.rejects(load({ IDEM__DEDUP__TTL: '30m', IDEM__DEDUP__WINDOW: '1h' }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.key, 'dedup.window');
      assert.match(
        error.message,
        /dedup\.window: is the older name of ttl.*3600000 ms and ttl = 1800000 ms differ/,
      );
      return true;
    });
  });

  it("names dedup.ttl when a store's maximum refuses it", async () => {
    const config = await loadConfig(nodeConfigSchema, { text: MINIMAL, env: { IDEM__DEDUP__TTL: '2m' } });
    const inner = new MemoryRepository();
    const store = new LoggedRepository(inner, new MemoryChangelog(), {
      capabilities: { ...inner.capabilities, maxTtlMs: 60_000 },
    });
    await assert.rejects(
      startDedupNode(config, store, pino({ enabled: false }), { kafka: {} as KafkaClient }),
      (error: unknown) => error instanceof ConfigError && /^dedup\.ttl: .*got 120000$/.test(error.message),
    );
    await store.close();
  });

  it('bin.ts exits 2 with one line on stderr for a bad config, before touching any server', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-node-config-'));
    try {
      const path = join(dir, 'node.toml');
      await writeFile(path, MINIMAL.replace('batchSize', 'x').replace('[dlq]\ntopic = "dlq"', ''));
      const { code, stderr } = await runSource(SOURCE_NODE_BIN, ['--config', path]);
      assert.equal(code, 2);
      assert.match(stderr, /^idem node: .*dlq/);
      assert.equal(stderr.trim().split('\n').length, 1, stderr);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
