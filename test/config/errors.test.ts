import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { z } from 'zod';
import { configSections, loadConfig, openRepository, resolveRepository } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';
import { nodeLogger } from '../../src/node/main.js';
import { nodeConfigSchema } from '../../src/node/options.js';
import { DynamoDbRepository } from '../../src/repositories/dynamodb/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

// Each case checks the whole message a person sees: where, which key, what is expected, the value given.

const schema = z.object(configSections).strict();

/** The rest of a valid node config, after a `[kafka]` and `[input]` table. */
const NODE_REST = '[output]\ntopic = "out"\n[dlq]\ntopic = "dlq"\n[dedup]\nid = "uid"\n';

function load(text: string, env: Record<string, string> = {}) {
  return loadConfig(schema, { path: 'idem.toml', text, env });
}

async function rejection(promise: Promise<unknown>): Promise<ConfigError> {
  const error = await promise.then(
    () => assert.fail('expected a ConfigError'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
  return error;
}

function thrown(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    return error;
  }
  return assert.fail('expected a ConfigError');
}

describe('option errors in plain words', () => {
  test('ttl = true says what a duration looks like and quotes the value', async () => {
    const error = await rejection(load('[consumer]\nttl = true\n'));
    assert.equal(
      error.message,
      'idem.toml:2: consumer.ttl: must be a duration like "5s" or a number of ms, got true',
    );
  });

  test('a missing store option "is required", at the [repository] table', async () => {
    const error = await rejection(resolveRepository(await load('[repository]\ntype = "rocksdb"\n')));
    assert.equal(error.key, 'repository.path');
    assert.equal(error.message, 'idem.toml:1: repository.path: is required');
  });

  test('an enum lists its values', async () => {
    const error = await rejection(load('[consumer]\nmode = "eagre"\n'));
    assert.equal(error.message, 'idem.toml:2: consumer.mode: must be one of "eager", "lazy", got "eagre"');
  });

  test('an unknown repository.type lists the valid types and quotes the value', async () => {
    const error = await rejection(load('[repository]\ntype = "mongo"\n'));
    assert.equal(
      error.message,
      'idem.toml:2: repository.type: unknown repository type; valid types: rocksdb, memory, redis, dynamodb, cassandra, kafka, postgres, mysql, got "mongo"',
    );
  });

  test('a whole-number option says so', async () => {
    const error = await rejection(
      loadConfig(nodeConfigSchema, {
        text: `[kafka]\nbrokers = ["b:9092"]\n[input]\ntopic = "in"\nbatchSize = 2.5\n${NODE_REST}`,
        env: {},
      }),
    );
    assert.equal(error.message, '<config>:5: input.batchSize: must be a whole number, got 2.5');
  });
});

describe('constructor options go through the same funnel', () => {
  test('new MemoryRepository({ maxEntries: -1 }) names the option, not a ZodError', () => {
    const error = thrown(() => new MemoryRepository({ maxEntries: -1 }));
    assert.equal(error.key, 'repository.maxEntries');
    assert.equal(
      error.message,
      'option maxEntries of new MemoryRepository(...): must be greater than 0, got -1',
    );
  });

  test('RocksdbRepository.open without a path', { skip: skipUnlessEnabled('rocksdb') }, async () => {
    const error = await rejection(RocksdbRepository.open({} as never));
    assert.equal(error.key, 'repository.path');
    assert.equal(error.message, 'option path of RocksdbRepository.open(...): is required');
  });

  test('an unknown constructor option lists the valid ones and keeps the zod cause', async () => {
    const error = await rejection(DynamoDbRepository.open({ table: 'ids', tabel: 'ids' } as never));
    assert.equal(error.key, 'repository.tabel');
    assert.match(
      error.message,
      /^option tabel of DynamoDbRepository\.open\(\.\.\.\): unknown option \(did you mean table\?\); valid options: table, /,
    );
    assert.ok(error.cause instanceof z.ZodError);
  });
});

describe('env variables cannot crash config loading', () => {
  const names = [
    'IDEM__CONSUMER__TO_STRING',
    'IDEM__CONSTRUCTOR__NAME',
    'IDEM__CONSTRUCTOR',
    'IDEM__TO_STRING__X',
    'IDEM__CONSUMER__CONSTRUCTOR__NAME',
    'IDEM__CONSUMER__HAS_OWN_PROPERTY',
    'IDEM__CONSUMER__VALUE_OF',
    'IDEM__CONSUMER__TTL__X',
    'IDEM__CONSUMER',
    'IDEM__REPOSITORY__CONSTRUCTOR__NAME',
    'IDEM__REPOSITORY__TO_STRING',
  ];
  for (const variable of names) {
    test(`${variable}=x is a ConfigError naming the variable`, async () => {
      const error = await rejection(
        load('[repository]\ntype = "memory"\n', { [variable]: 'x' }).then((config) =>
          resolveRepository(config),
        ),
      );
      assert.ok(error.message.startsWith(`env ${variable}: `), error.message);
    });
  }

  test('the exact messages of the two reported crashes', async () => {
    const fromToString = await rejection(load('', { IDEM__CONSUMER__TO_STRING: 'x' }));
    assert.match(
      fromToString.message,
      /^env IDEM__CONSUMER__TO_STRING: consumer\.toString: unknown key; valid keys here: id, mode, ttl, /,
    );
    const fromConstructor = await rejection(load('', { IDEM__CONSTRUCTOR__NAME: 'x' }));
    assert.equal(
      fromConstructor.message,
      'env IDEM__CONSTRUCTOR__NAME: constructor: unknown key; valid keys here: repository, consumer',
    );
  });

  test('a missing key in a table that only a variable created names that variable', async () => {
    const error = await rejection(load('', { IDEM__CONSUMER__EVENT_TIME__BY: 'key' }));
    assert.equal(
      error.message,
      'env IDEM__CONSUMER__EVENT_TIME__BY: consumer.eventTime.interval: is required',
    );
  });

  test('a name with an empty step is named as given', async () => {
    const error = await rejection(load('', { IDEM__CONSUMER____TTL: '5s' }));
    assert.equal(
      error.message,
      'env IDEM__CONSUMER____TTL: empty key segment; separate keys with exactly two underscores',
    );
  });

  test('an unknown section made by a variable names the variable, not the file', async () => {
    const error = await rejection(load('[consumer]\nttl = "1h"\n', { IDEM__CONSUMR__TTL: '5s' }));
    assert.equal(
      error.message,
      'env IDEM__CONSUMR__TTL: consumr: unknown key (did you mean consumer?); valid keys here: repository, consumer',
    );
  });
});

describe('secrets never appear in errors or logs', () => {
  const url = 'redis://default:S3cr3t#Pass@redis.internal:6379';

  test('a URL password is redacted in the value an error quotes', async () => {
    const config = await load(`[repository]\ntype = "redis"\nurl = "${url}"\n`);
    const error = await rejection(resolveRepository(config));
    assert.equal(
      error.message,
      'idem.toml:3: repository.url: must be a redis:// or rediss:// URL, got "redis://default:[redacted]@redis.internal:6379"',
    );
  });

  test('a password of the wrong type is not printed', async () => {
    const config = await load(
      '[repository]\ntype = "redis"\nurl = "redis://127.0.0.1"\npassword = 123456789\n',
    );
    const error = await rejection(resolveRepository(config));
    assert.equal(error.message, 'idem.toml:4: repository.password: must be a string, got [redacted]');
  });

  test('a SASL table and cloud credentials are not printed', async () => {
    const sasl = await rejection(
      loadConfig(nodeConfigSchema, {
        text: `[kafka]\nbrokers = ["b:9092"]\nsasl = { mechanism = "plain", username = "u", password = 12345678 }\n[input]\ntopic = "in"\n${NODE_REST}`,
        env: {},
      }),
    );
    assert.equal(sasl.message, '<config>:3: kafka.sasl.password: must be a string, got [redacted]');
    const credentials = await rejection(
      DynamoDbRepository.open({
        table: 'ids',
        credentials: { accessKeyId: 'AKIA', secretAccessKey: 7 },
      } as never),
    );
    assert.equal(
      credentials.message,
      'option credentials.secretAccessKey of DynamoDbRepository.open(...): must be a string, got [redacted]',
    );
  });

  test('the node logger redacts secrets in whatever object it is given', async () => {
    let out = '';
    const sink = new Writable({
      write(chunk, _encoding, done) {
        out += String(chunk);
        done();
      },
    });
    const logger = nodeLogger(sink);
    logger.info({ kafka: { sasl: { mechanism: 'plain', username: 'u', password: 'S3cr3t' } } }, 'config');
    logger.info({ repository: { password: 'S3cr3t', tls: { key: 'S3cr3t-PEM' } } }, 'store');
    logger.info({ credentials: { secretAccessKey: 'S3cr3t' }, key: 'order-1' }, 'record');
    logger.flush();
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(!out.includes('S3cr3t'), out);
    assert.match(out, /"key":"order-1"/); // a message key is not a secret
    assert.match(out, /\[redacted\]/);
  });
});

describe('switching the store from the environment', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-switch-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const redisFile =
    '[repository]\ntype = "redis"\nurl = "redis://default:S3cr3t@redis.internal:6379"\nkeyPrefix = "app:"\n';

  test('IDEM__REPOSITORY__TYPE=memory works over a file written for Redis, with a warning', async (t) => {
    const warnings: string[] = [];
    const config = await load(redisFile, { IDEM__REPOSITORY__TYPE: 'memory' });
    const repository = await openRepository(config, { onWarning: (w) => warnings.push(w) });
    t.after(() => repository.close());
    assert.ok(repository instanceof MemoryRepository);
    assert.deepEqual(warnings, [
      'idem.toml: ignoring repository.url, repository.keyPrefix: written for the redis store, but env IDEM__REPOSITORY__TYPE selects memory',
    ]);
  });

  test('a key the variables set for the wrong store is still an error, named by its variable', async () => {
    const config = await load(redisFile, {
      IDEM__REPOSITORY__TYPE: 'memory',
      IDEM__REPOSITORY__URL: 'redis://x',
    });
    const error = await rejection(resolveRepository(config, { onWarning: () => undefined }));
    assert.match(
      error.message,
      /^env IDEM__REPOSITORY__URL: repository\.url: unknown key; valid keys here: type, maxEntries/,
    );
  });

  test('a file for the default store, switched to memory by a flag-like override', async () => {
    const config = await loadConfig(schema, {
      path: 'idem.toml',
      text: `[repository]\npath = "${join(dir, 'store')}"\n`,
      env: {},
      overrides: [{ key: 'repository.type', value: 'memory', source: '--type' }],
    });
    const warnings: string[] = [];
    const resolved = await resolveRepository(config, { onWarning: (w) => warnings.push(w) });
    assert.equal(resolved.type, 'memory');
    assert.deepEqual(warnings, [
      'idem.toml: ignoring repository.path: written for the rocksdb store, but --type selects memory',
    ]);
  });

  test('without a switch, a key the store does not know is still an error', async () => {
    const error = await rejection(
      resolveRepository(await load('[repository]\ntype = "memory"\nurl = "x"\n')),
    );
    assert.match(error.message, /^idem\.toml:3: repository\.url: unknown key/);
  });
});
