import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { z } from 'zod';
import { configSections, loadConfig, openRepository, resolveRepository } from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';
import {
  loadFailure,
  loadRepositoryModule,
  repositoryPackages,
  repositoryTypes,
} from '../../src/repositories/registry.js';

const schema = z.object(configSections).strict();

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

describe('[repository]', () => {
  test('store options are validated by the store schema and keyed repository.<key>', async () => {
    const config = await load('[repository]\ntype = "memory"\nmaxEntries = -5\n');
    const error = await configError(resolveRepository(config));
    assert.equal(error.key, 'repository.maxEntries');
    assert.match(error.message, /^idem\.toml:3: repository\.maxEntries: .*-5/);
  });

  test('an unknown store option is rejected and the valid ones listed', async () => {
    const config = await load('[repository]\ntype = "memory"\nmaxEntrys = 5\n');
    const error = await configError(resolveRepository(config));
    assert.equal(error.key, 'repository.maxEntrys');
    assert.match(
      error.message,
      /unknown key \(did you mean maxEntries\?\); valid keys here: type, maxEntries/,
    );
  });

  test('a misspelt type: did you mean type, and that the default store is what the keys listed belong to', async () => {
    const config = await load('[repository]\npath = "ids"\ntyp = "memory"\n');
    const error = await configError(resolveRepository(config));
    assert.equal(error.key, 'repository.typ');
    assert.match(
      error.message,
      /^idem\.toml:3: repository\.typ: unknown key \(did you mean type\?\); valid keys here \(repository\.type is not set, so the default store, rocksdb, is used\): type, path, /,
    );
    // With type given, the plain list (type first), and no suggestion for a key near nothing.
    const given = await load('[repository]\ntype = "memory"\nzzzzzz = 1\n');
    const plain = await configError(resolveRepository(given));
    assert.equal(
      plain.message,
      'idem.toml:3: repository.zzzzzz: unknown key; valid keys here: type, maxEntries',
    );
  });

  test('a misspelt key in a table that may also be written as a value: did you mean, and the valid keys', async () => {
    const store = '[repository]\ntype = "redis"\nurl = "redis://127.0.0.1"\n';
    const text = `${store}\n[repository.tls]\nca = "x"\n`;
    const config = await load(`${text}rejectUnauthorised = false\n`);
    const error = await configError(resolveRepository(config));
    assert.equal(error.key, 'repository.tls.rejectUnauthorised');
    assert.equal(
      error.message,
      'idem.toml:7: repository.tls.rejectUnauthorised: unknown key (did you mean rejectUnauthorized?); ' +
        'valid keys here: ca, cert, key, servername, rejectUnauthorized',
    );
    // The value form and the table form are both still taken.
    const asValue = await resolveRepository(await load(`${store}tls = true\n`));
    assert.equal((asValue.options as { tls?: unknown }).tls, true);
    const asTable = await resolveRepository(await load(`${text}rejectUnauthorized = false\n`));
    assert.deepEqual((asTable.options as { tls?: unknown }).tls, { ca: 'x', rejectUnauthorized: false });
  });

  test('env keys reach store options whatever their case, coerced by the store schema', async () => {
    const config = await load('[repository]\ntype = "memory"\nmaxEntries = 5\n', {
      IDEM__REPOSITORY__MAX_ENTRIES: '42',
    });
    const resolved = await resolveRepository(config);
    assert.equal(resolved.type, 'memory');
    assert.deepEqual(resolved.options, { maxEntries: 42 });
  });

  test('a store option error from env names the variable', async () => {
    const config = await load('[repository]\ntype = "memory"\n', { IDEM__REPOSITORY__MAXENTRIES: 'many' });
    const error = await configError(resolveRepository(config));
    assert.match(error.message, /^env IDEM__REPOSITORY__MAXENTRIES: repository\.maxEntries: /);
  });

  test('a missing required store option points at the [repository] table', async () => {
    const config = await load('[consumer]\nttl = "1h"\n\n[repository]\ntype = "redis"\n');
    const error = await configError(resolveRepository(config));
    assert.equal(error.message, 'idem.toml:4: repository.url: is required: set url, host or cluster');
  });

  test('openRepository opens the configured store', async (t) => {
    const repository = await openRepository(await load('[repository]\ntype = "memory"\n'));
    t.after(() => repository.close());
    assert.equal((await repository.add('a', { ttlMs: 1000 })).added, true);
  });

  test('every type has a loadable module whose type matches', async () => {
    for (const type of repositoryTypes) {
      if (type === 'rocksdb' && process.env.IDEM_SKIP_STORES?.includes('rocksdb')) continue;
      const module = await loadRepositoryModule(type);
      assert.equal(module.type, type);
      assert.ok(Array.isArray(repositoryPackages[type]));
    }
  });
});

describe('[repository] nested env keys', () => {
  test('a nested store option is re-keyed against the store schema', async () => {
    const config = await load('[repository]\ntype = "cassandra"\ncontactPoints = ["127.0.0.1:9042"]\n', {
      IDEM__REPOSITORY__CONSISTENCY__READ: 'ONE',
      IDEM__REPOSITORY__BATCHCONCURRENCY: '8',
    });
    const resolved = await resolveRepository(config);
    const options = resolved.options as {
      consistency: { read: string; write: string };
      batchConcurrency: number;
    };
    assert.equal(options.consistency.read, 'ONE');
    assert.equal(options.consistency.write, 'LOCAL_QUORUM');
    assert.equal(options.batchConcurrency, 8);
  });
});

describe('store module loading', () => {
  test('a missing optional client library names the npm package to install', () => {
    const notFound = Object.assign(
      new Error("Cannot find package 'ioredis' imported from /x/redis/connection.js"),
      {
        code: 'ERR_MODULE_NOT_FOUND',
      },
    );
    const error = loadFailure('redis', notFound);
    assert.equal(error.key, 'repository.type');
    assert.match(error.message, /npm install ioredis/);
    assert.equal(error.cause, notFound);
  });

  test('any other load failure keeps the loader message', () => {
    const error = loadFailure('rocksdb', new Error('native binding failed'));
    assert.match(error.message, /rocksdb store could not be loaded: native binding failed/);
  });
});
