import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { storeSchemes } from '../../src/cli/store-url.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { runCli } from './run-cli.js';

// Issue 20, §3: misconfigurations a newcomer makes in the first hour must be said, in one line, never run silently.
// Every test owns its files and working directory, so the tests of a block run side by side.

let dir: string;
let input: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'idem-misconfig-'));
  input = join(dir, 'events.ndjson');
  await writeFile(input, '{"id":"a"}\n{"id":"b"}\n{"id":"a"}\n');
});
after(() => rm(dir, { recursive: true, force: true }));

/** A loopback port nothing listens on: bound by the system, then closed. */
function sparePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject()));
    });
  });
}

/** The lines of a stderr, without the empty last one. */
const lines = (text: string) => text.split('\n').filter((l) => l !== '');

describe('idem dedup --store <url>: a URL selects a store, never a directory', { concurrency: 4 }, () => {
  it('an unknown scheme is refused with exit 2, one line listing the known schemes, and no directory made', async () => {
    const cwd = await mkdtemp(join(dir, 'cwd-'));
    const result = await runCli(['dedup', '--id', 'id', '--store', 'mongodb://127.0.0.1/x', input], { cwd });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.stdout, '');
    assert.equal(lines(result.stderr).length, 1, result.stderr);
    assert.match(result.stderr, /--store/);
    assert.match(result.stderr, /"mongodb:"/);
    for (const scheme of Object.keys(storeSchemes)) assert.ok(result.stderr.includes(`${scheme}://`), scheme);
    assert.match(result.stderr, /\.\/mongodb:/, 'says how to name a directory with a colon');
    assert.deepEqual(readdirSync(cwd), [], 'nothing created');
  });

  it('redis:// selects the Redis store: an unreachable one fails the run (exit 3), no directory named "redis:"', async () => {
    const cwd = await mkdtemp(join(dir, 'cwd-'));
    const result = await runCli(
      ['dedup', '--id', 'id', '--store', 'redis://:secret@127.0.0.1:1', '--no-progress', input],
      { cwd, env: { IDEM__REPOSITORY__CONNECT_TIMEOUT_MS: '500' } },
    );
    assert.notEqual(result.code, 0, result.stderr);
    assert.equal(result.stdout, '');
    assert.ok(!existsSync(join(cwd, 'redis:')), 'no directory named after the scheme');
    assert.deepEqual(readdirSync(cwd), []);
    assert.doesNotMatch(result.stderr, /secret/, 'the password is never printed');
  });

  it('redis:// on a closed port: the failed open leaves no timer or socket, so the run ends at once', async () => {
    const port = await sparePort();
    const result = await runCli(
      ['dedup', '--id', 'id', '--no-progress', '--store', `redis://127.0.0.1:${port}`, input],
      { leftovers: true },
    );
    assert.doesNotMatch(result.stderr, /leftover/);
    assert.equal(result.code, 3, result.stderr);
    assert.match(result.stderr, new RegExp(`redis: cannot connect to redis://127\\.0\\.0\\.1:${port}`));
  });

  it('a Redis cluster on closed ports: the failed open leaves no timer or socket, so the run ends at once', async () => {
    const seeds = [`127.0.0.1:${await sparePort()}`, `127.0.0.1:${await sparePort()}`];
    const config = join(dir, `cluster-${randomUUID()}.toml`);
    await writeFile(config, `[repository]\ntype = "redis"\ncluster = ${JSON.stringify(seeds)}\n`);
    const result = await runCli(['dedup', '--id', 'id', '--no-progress', '--config', config, input], {
      leftovers: true,
    });
    assert.doesNotMatch(result.stderr, /leftover/);
    assert.equal(result.code, 3, result.stderr);
    assert.match(
      result.stderr,
      new RegExp(`redis: cannot connect to ${seeds.join(',')} \\(repository\\.cluster\\)`),
    );
  });

  it('redis://<stack> dedups in Redis and names the store in the summary', {
    skip: skipUnlessEnabled('redis'),
  }, async (t) => {
    const prefix = `idem-cli-${randomUUID()}:`;
    t.after(async () => {
      const repository = await RedisRepository.open({ url: endpoints.redisUrl, keyPrefix: prefix });
      await repository.clear();
      await repository.close();
    });
    const cwd = await mkdtemp(join(dir, 'cwd-'));
    const args = ['dedup', '--id', 'id', '--store', endpoints.redisUrl, '--no-progress', input];
    const env = { IDEM__REPOSITORY__KEY_PREFIX: prefix };
    const first = await runCli(args, { cwd, env });
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, '{"id":"a"}\n{"id":"b"}\n');
    assert.match(first.stderr, /store redis/);
    const again = await runCli(args, { cwd, env });
    assert.equal(again.stdout, '', 'the ids were kept in Redis');
    assert.deepEqual(readdirSync(cwd), [], 'no RocksDB directory');
  });

  it('file:// names a RocksDB directory', async () => {
    const store = join(dir, 'by-url');
    const result = await runCli([
      'dedup',
      '--id',
      'id',
      '--store',
      `file://${store}`,
      '--no-progress',
      input,
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.ok(existsSync(store));
    assert.match(result.stderr, /\(RocksDB\)/);
  });
});

describe('an unknown flag: one line naming it and the closest valid one', { concurrency: 4 }, () => {
  it('idem dedup --idd id', async () => {
    const result = await runCli(['dedup', '--idd', 'id', input]);
    assert.equal(result.code, 2);
    assert.deepEqual(lines(result.stderr).length, 1, result.stderr);
    assert.match(result.stderr, /--idd/);
    assert.match(result.stderr, /did you mean --id\b/);
  });

  it('idem dedup --stroe x (a transposition), and idem node --confg', async () => {
    const dedup = await runCli(['dedup', '--id', 'id', '--stroe', 'x', input]);
    assert.equal(dedup.code, 2);
    assert.equal(lines(dedup.stderr).length, 1, dedup.stderr);
    assert.match(dedup.stderr, /--stroe.*did you mean --store\b/);
    const node = await runCli(['node', '--confg', 'node.toml']);
    assert.equal(node.code, 2);
    assert.equal(lines(node.stderr).length, 1, node.stderr);
    assert.match(node.stderr, /--confg.*did you mean --config\b/);
  });

  it('a far-off flag still names the closest one, and an unknown command names the closest command', async () => {
    const far = await runCli(['dedup', '--zzzzzz', input]);
    assert.equal(far.code, 2);
    assert.equal(lines(far.stderr).length, 1, far.stderr);
    assert.match(far.stderr, /--zzzzzz.*did you mean --/);
    const command = await runCli(['dedupe', input]);
    assert.equal(command.code, 2);
    assert.equal(lines(command.stderr).length, 1, command.stderr);
    assert.match(command.stderr, /dedupe.*did you mean dedup\b/);
  });
});

describe('idem node without --config', () => {
  it('says that no config was given and how to write one, in one line, exit 2', async () => {
    const cwd = await mkdtemp(join(dir, 'cwd-'));
    const result = await runCli(['node'], { cwd, env: { IDEM_CONFIG: '' } });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(lines(result.stderr).length, 1, result.stderr);
    assert.match(result.stderr, /no config given/);
    assert.match(result.stderr, /--config/);
    assert.match(result.stderr, /IDEM_CONFIG/);
    assert.match(result.stderr, /examples\/node\.toml/);
    assert.doesNotMatch(result.stderr, /more problems/);
  });
});

describe('config file mistakes', { concurrency: 4 }, () => {
  it('[repository] typ = "memory": did you mean type, and that the default store applies (exit 2)', async () => {
    const config = join(dir, 'typ.toml');
    await writeFile(config, '[repository]\ntyp = "memory"\n');
    const cwd = await mkdtemp(join(dir, 'cwd-'));
    const result = await runCli(['dedup', '--id', 'id', '--config', config, input], { cwd });
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.stdout, '');
    assert.equal(lines(result.stderr).length, 1, result.stderr);
    assert.match(
      result.stderr,
      /typ\.toml:2: repository\.typ: unknown key \(did you mean type\?\); valid keys here \(repository\.type is not set, so the default store, rocksdb, is used\): type, /,
    );
  });

  it('a file with two mistakes: both reported in one run, each naming its line (exit 2)', async () => {
    const config = join(dir, 'two.toml');
    await writeFile(config, '[consumer]\nttl = "forever"\n\n[dedup]\nbatchSize = 0\n');
    const result = await runCli(['dedup', '--id', 'id', '--config', config, input]);
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.stdout, '');
    assert.deepEqual(lines(result.stderr), [
      `idem dedup: ${config}:2: consumer.ttl: must be a duration like "5s" or a number of ms, got "forever"`,
      `  ${config}:5: dedup.batchSize: must be at least 1, got 0`,
    ]);
  });

  it('two mistakes in [repository]: both reported', async () => {
    const config = join(dir, 'two-store.toml');
    await writeFile(config, '[repository]\ntype = "memory"\nmaxEntries = -1\nmaxEntrys = 5\n');
    const result = await runCli(['dedup', '--id', 'id', '--config', config, input]);
    assert.equal(result.code, 2, result.stderr);
    const [first, second, ...rest] = lines(result.stderr);
    assert.deepEqual(rest, [], result.stderr);
    assert.match(first as string, /two-store\.toml:3: repository\.maxEntries: .*-1/);
    assert.match(
      second as string,
      /^ {2}.*two-store\.toml:4: repository\.maxEntrys: unknown key \(did you mean maxEntries\?\)/,
    );
  });
});
