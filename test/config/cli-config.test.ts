import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { runCli } from '../cli/run-cli.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

// How `idem dedup` reads its config and builds its store: the messages a person sees on stderr.

// Each test owns its files (its own input) and store paths, so they run side by side.
describe('idem dedup config', { concurrency: 4 }, () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-cli-config-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  let inputs = 0;
  /** A new input file per call: a test rewriting one another test's CLI reads would race. */
  const input = () => file(`in-${++inputs}.ndjson`, '{"id":1}\n{"id":2}\n{"id":1}\n');

  test('--batch-size abc names the flag and asks for a whole number', async () => {
    const result = await runCli([
      'dedup',
      '--id',
      'id',
      '--store',
      join(dir, 'bs'),
      '--batch-size',
      'abc',
      input(),
    ]);
    assert.equal(result.code, 2, result.stderr);
    assert.equal(
      result.stderr,
      'idem dedup: --batch-size: dedup.batchSize: must be a whole number, got "abc"\n',
    );
  });

  test('--batch-size 0 says what is allowed', async () => {
    const result = await runCli([
      'dedup',
      '--id',
      'id',
      '--store',
      join(dir, 'bs0'),
      '--batch-size',
      '0',
      input(),
    ]);
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.stderr, 'idem dedup: --batch-size: dedup.batchSize: must be at least 1, got 0\n');
  });

  test('a bad store option names the variable that set it, with the secret redacted', async () => {
    const result = await runCli(['dedup', '--id', 'id', input()], {
      env: {
        IDEM__REPOSITORY__TYPE: 'redis',
        IDEM__REPOSITORY__URL: 'redis://default:S3cr3t#Pass@redis.internal:6379',
      },
    });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(
      result.stderr,
      'idem dedup: env IDEM__REPOSITORY__URL: repository.url: must be a redis:// or rediss:// URL, got "redis://default:[redacted]@redis.internal:6379"\n',
    );
  });

  test('--store and the config file set the RocksDB path', {
    skip: skipUnlessEnabled('rocksdb'),
  }, async () => {
    const fromFile = join(dir, 'from-file');
    const config = file('rocks.toml', `[repository]\ntype = "rocksdb"\npath = "${fromFile}"\n`);
    const first = await runCli(['dedup', '--id', 'id', '--config', config, input()]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, '{"id":1}\n{"id":2}\n');
    assert.ok(existsSync(fromFile), 'the store lives at the path the file names');
    const fromFlag = join(dir, 'from-flag');
    const second = await runCli(['dedup', '--id', 'id', '--config', config, '--store', fromFlag, input()]);
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, '{"id":1}\n{"id":2}\n', 'a fresh store at the flag path: nothing seen yet');
    assert.ok(existsSync(fromFlag));
  });

  test('--store with another store type is refused by name', async () => {
    const config = file('mem.toml', '[repository]\ntype = "memory"\n');
    const result = await runCli([
      'dedup',
      '--id',
      'id',
      '--config',
      config,
      '--store',
      join(dir, 'x'),
      input(),
    ]);
    assert.equal(result.code, 2);
    assert.equal(
      result.stderr,
      'idem dedup: --store: repository.type: --store needs the rocksdb store, but the config selects memory\n',
    );
  });

  test('IDEM__REPOSITORY__TYPE=memory runs over a file written for Redis, warning about its keys', async () => {
    const config = file(
      'redis.toml',
      '[repository]\ntype = "redis"\nurl = "redis://default:S3cr3t@redis.internal:6379"\n[consumer]\nid = "id"\n',
    );
    const result = await runCli(['dedup', '--config', config, '--no-progress', input()], {
      env: { IDEM__REPOSITORY__TYPE: 'memory' },
    });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '{"id":1}\n{"id":2}\n');
    assert.match(
      result.stderr,
      /^idem dedup: .*redis\.toml: ignoring repository\.url: written for the redis store, but env IDEM__REPOSITORY__TYPE selects memory\n/,
    );
    assert.ok(!result.stderr.includes('S3cr3t'));
  });
});
