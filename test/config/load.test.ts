import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { z } from 'zod';
import { cliConfigSchema } from '../../src/cli/options.js';
import { configSections, loadConfig } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';

const schema = z
  .object({ ...configSections, metrics: z.object({ enabled: z.boolean().default(true) }).prefault({}) })
  .strict();

/** Loads TOML text as if from `idem.toml`, with no env unless given. */
function load(text: string, env: Record<string, string> = {}) {
  return loadConfig(schema, { path: 'idem.toml', text, env });
}

async function configError(promise: Promise<unknown>): Promise<ConfigError> {
  const error = await promise.then(
    () => assert.fail('expected a ConfigError'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
  return error;
}

describe('loadConfig', () => {
  test('applies every default when there is no file', async () => {
    const config = await loadConfig(schema, { env: {} });
    assert.equal(config.repository.type, 'rocksdb');
    assert.equal(config.consumer.ttl, 24 * 3_600_000);
    assert.equal(config.metrics.enabled, true);
  });

  test('reads a file named by path, then by IDEM_CONFIG', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-config-'));
    try {
      const file = join(dir, 'idem.toml');
      await writeFile(file, '[consumer]\nttl = "2h"\n');
      assert.equal((await loadConfig(schema, { path: file, env: {} })).consumer.ttl, 7_200_000);
      assert.equal((await loadConfig(schema, { env: { IDEM_CONFIG: file } })).consumer.ttl, 7_200_000);
      const missing = await configError(loadConfig(schema, { path: join(dir, 'nope.toml'), env: {} }));
      assert.match(missing.message, /nope\.toml.*ENOENT/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a TOML syntax error names file:line:column', async () => {
    const error = await configError(load('[consumer]\nmode = "lazy"\nttl = = 5\n'));
    assert.match(error.message, /^idem\.toml:3:\d+: /);
  });

  test('a bad value names the dotted key, its line, what was expected and the value given', async () => {
    const error = await configError(load('[consumer]\nmode = "lazy"\nttl = "soon"\n'));
    assert.equal(error.key, 'consumer.ttl');
    assert.equal(
      error.message,
      'idem.toml:3: consumer.ttl: must be a duration like "5s" or a number of ms, got "soon"',
    );
  });

  test('a value of the wrong type says what was expected', async () => {
    const error = await configError(load('[consumer]\nskipDuplicate = "yes"\n'));
    assert.equal(error.key, 'consumer.skipDuplicate');
    assert.equal(error.message, 'idem.toml:2: consumer.skipDuplicate: must be true or false, got "yes"');
  });

  test('an unknown repository.type lists the valid types', async () => {
    const error = await configError(load('[repository]\ntype = "mongodb"\n'));
    assert.equal(error.key, 'repository.type');
    assert.match(error.message, /"mongodb"/);
    for (const type of ['rocksdb', 'memory', 'redis', 'dynamodb', 'cassandra']) {
      assert.match(error.message, new RegExp(type));
    }
  });

  test('every problem of a file is reported in one error, each on its own line naming its line', async () => {
    const text = '[consumer]\nttl = "forever"\nmodee = "lazy"\n\n[dedup]\nbatchSize = 0\n';
    const error = await loadConfig(cliConfigSchema, { path: 'idem.toml', text, env: {} }).then(
      () => assert.fail('loaded a config with three mistakes'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ConfigError);
    assert.equal(error.key, 'consumer.ttl');
    const lines = error.message.split('\n');
    assert.equal(lines.length, 3, error.message);
    assert.equal(
      lines[0],
      'idem.toml:2: consumer.ttl: must be a duration like "5s" or a number of ms, got "forever"',
    );
    assert.match(
      lines[1] as string,
      /^ {2}idem\.toml:3: consumer\.modee: unknown key \(did you mean mode\?\); valid keys here: id, mode, /,
    );
    assert.equal(lines[2], '  idem.toml:6: dedup.batchSize: must be at least 1, got 0');
  });

  test("the store's key mistakes come in the same error as the other tables'", async () => {
    const text =
      '[consumer]\nttl = "forever"\n\n[repository]\ntype = "memory"\nmaxEntrys = 5\nmaxEntries = -1\n';
    const error = await configError(load(text));
    assert.equal(error.key, 'consumer.ttl');
    assert.deepEqual(error.message.split('\n'), [
      'idem.toml:2: consumer.ttl: must be a duration like "5s" or a number of ms, got "forever"',
      '  idem.toml:7: repository.maxEntries: must be greater than 0, got -1',
      '  idem.toml:6: repository.maxEntrys: unknown key (did you mean maxEntries?); valid keys here: type, maxEntries',
    ]);
    // The default store's keys too, and a store key set by env.
    const env = await configError(
      load('[consumer]\nttl = "forever"\n', {
        IDEM__REPOSITORY__TYPE: 'memory',
        IDEM__REPOSITORY__MAXENTRIES: 'x',
      }),
    );
    assert.match(env.message, /\n {2}env IDEM__REPOSITORY__MAXENTRIES: repository\.maxEntries: /);
    const rocksdb = await configError(load('[consumer]\nttl = "forever"\n\n[repository]\npaht = "ids"\n'));
    assert.match(
      rocksdb.message,
      /\n {2}idem\.toml:5: repository\.paht: unknown key \(did you mean path\?\)/,
    );
    // A wrong type is the config schema's own problem, said once; the store's keys cannot be checked then.
    const type = await configError(
      load('[consumer]\nttl = "forever"\n\n[repository]\ntype = "mongo"\nx = 1\n'),
    );
    const lines = type.message.split('\n');
    assert.equal(lines.length, 2, type.message);
    assert.match(lines[0] as string, /^idem\.toml:5: repository\.type: unknown repository type/);
    assert.match(lines[1] as string, /^ {2}idem\.toml:2: consumer\.ttl: /);
  });

  test('unknown keys are rejected by name, in a section and at the top', async () => {
    const inSection = await configError(load('[consumer]\nttl = "1h"\nttll = "2h"\n'));
    assert.equal(inSection.key, 'consumer.ttll');
    assert.match(
      inSection.message,
      /^idem\.toml:3: consumer\.ttll: unknown key \(did you mean ttl\?\); valid keys here: .*\bttl\b/,
    );
    const section = await configError(load('[consumr]\nttl = "1h"\n'));
    assert.equal(section.key, 'consumr');
  });

  test('env overrides win over the file and are coerced as the schema wants', async () => {
    const config = await load(
      '[consumer]\nttl = "2h"\nskipDuplicate = true\n[repository]\ntype = "memory"\n',
      {
        IDEM__CONSUMER__TTL: '1h',
        IDEM__CONSUMER__SKIP_DUPLICATE: 'false',
        IDEM__METRICS__ENABLED: 'false',
        IDEM__REPOSITORY__TYPE: 'redis',
        idem__consumer__lease: '30000',
      },
    );
    assert.equal(config.consumer.ttl, 3_600_000);
    assert.equal(config.consumer.skipDuplicate, false);
    assert.equal(config.metrics.enabled, false);
    assert.equal(config.repository.type, 'redis');
    assert.equal(config.consumer.lease, 30_000);
  });

  test('a bad env value names the variable', async () => {
    const error = await configError(load('', { IDEM__CONSUMER__MODE: 'eventually' }));
    assert.equal(error.key, 'consumer.mode');
    assert.match(error.message, /^env IDEM__CONSUMER__MODE: consumer\.mode: .*"eventually"/);
  });

  test('an unknown env key is rejected like an unknown file key', async () => {
    const error = await configError(load('', { IDEM__CONSUMER__COLOUR: 'blue' }));
    assert.equal(error.key, 'consumer.colour');
    assert.match(error.message, /env IDEM__CONSUMER__COLOUR/);
  });

  test('explicit overrides (CLI flags) win over env and name the flag', async () => {
    const config = await loadConfig(schema, {
      text: '[consumer]\nttl = "2h"\n',
      env: { IDEM__CONSUMER__TTL: '1h' },
      overrides: [{ key: 'consumer.ttl', value: '5m', source: '--ttl' }],
    });
    assert.equal(config.consumer.ttl, 300_000);
    const error = await configError(
      loadConfig(schema, { env: {}, overrides: [{ key: 'consumer.ttl', value: 'x', source: '--ttl' }] }),
    );
    assert.match(error.message, /^--ttl: consumer\.ttl: /);
  });
});
