import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ROCKSDB_BINDING_VERSION } from '../../src/repositories/rocksdb/binding.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { cleanEnv, installedProject, installedVersion, root } from './pack.js';

const fix = `npm install @nxtedition/rocksdb@${ROCKSDB_BINDING_VERSION}`;

/** Runs `npx idem ...` in a fresh directory of the project, with a copy of the README's example. */
function idem(project: string, args: string[]) {
  const dir = mkdtempSync(join(project, 'run-'));
  copyFileSync(join(root, 'examples/events.ndjson'), join(dir, 'events.ndjson'));
  const run = spawnSync('npx', ['--no', '--', 'idem', ...args], {
    cwd: dir,
    encoding: 'utf8',
    env: cleanEnv(),
  });
  return { ...run, dir };
}

/** Runs an ES module program in the project, printing what it prints. */
function node(project: string, program: string) {
  return spawnSync(process.execPath, ['--input-type=module', '-e', program], {
    cwd: project,
    encoding: 'utf8',
    env: cleanEnv(),
  });
}

describe('the RocksDB binding is optional', () => {
  it('is pinned to the exact version whose internal API binding.ts uses', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    assert.equal(pkg.optionalDependencies['@nxtedition/rocksdb'], ROCKSDB_BINDING_VERSION);
    assert.equal(pkg.dependencies['@nxtedition/rocksdb'], undefined);
    assert.equal(installedVersion('@nxtedition/rocksdb'), ROCKSDB_BINDING_VERSION);
  });

  describe('installed with --omit=optional (packed tarball)', () => {
    it('leaves the binding out', () => {
      const project = installedProject('no-optional');
      assert.equal(existsSync(join(project, 'node_modules/@nxtedition/rocksdb')), false);
    });

    it('idem says in one line which of its packages the install left out', () => {
      const run = idem(installedProject('no-optional'), ['dedup', '--id', 'id', 'events.ndjson']);
      try {
        assert.equal(run.status, 3, run.stderr);
        assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
        assert.match(
          run.stderr,
          /^idem needs the npm package "commander", which is not installed: npm install commander/,
        );
        assert.match(run.stderr, /--omit=optional/);
        assert.equal(existsSync(join(run.dir, '.idem-store')), false);
      } finally {
        rmSync(run.dir, { recursive: true, force: true });
      }
    });

    it('with the CLI installed, idem dedup on the default store says what to install, or to use --store memory', () => {
      const run = idem(installedProject('no-optional-cli'), ['dedup', '--id', 'id', 'events.ndjson']);
      try {
        assert.notEqual(run.status, 0);
        assert.match(
          run.stderr,
          /the rocksdb store needs the optional package @nxtedition\/rocksdb, which is not installed/,
        );
        assert.ok(run.stderr.includes(fix), run.stderr);
        assert.ok(run.stderr.includes('--store memory'), run.stderr);
        assert.doesNotMatch(run.stderr, /\n\s+at /, 'a stack trace reached the user');
        assert.equal(existsSync(join(run.dir, '.idem-store')), false);
      } finally {
        rmSync(run.dir, { recursive: true, force: true });
      }
    });

    it('with the CLI installed, idem dedup --store memory works', () => {
      const run = idem(installedProject('no-optional-cli'), [
        'dedup',
        '--store',
        'memory',
        '--id',
        'id',
        'events.ndjson',
      ]);
      try {
        assert.equal(run.status, 0, run.stderr);
        assert.match(run.stderr, /memory/);
      } finally {
        rmSync(run.dir, { recursive: true, force: true });
      }
    });

    it('RocksdbRepository.open rejects with a ConfigError naming the fix; importing the store still works', () => {
      const run = node(
        installedProject('no-optional'),
        `import { RocksdbRepository } from 'idempotent-consumer/rocksdb';
         try { await RocksdbRepository.open({ path: 'never-created' }); console.log('opened'); }
         catch (error) { console.log(JSON.stringify({ name: error.name, code: error.code, message: error.message })); }`,
      );
      assert.equal(run.status, 0, run.stderr);
      const error = JSON.parse(run.stdout);
      assert.equal(error.name, 'ConfigError');
      assert.equal(error.code, 'IDEM_ERR_CONFIG');
      assert.ok(error.message.includes(fix), error.message);
      assert.equal(existsSync(join(installedProject('no-optional'), 'never-created')), false);
    });

    it('the memory store works', () => {
      const run = node(
        installedProject('no-optional'),
        `import { IdempotentConsumer } from 'idempotent-consumer';
         import { MemoryRepository } from 'idempotent-consumer/memory';
         const consumer = new IdempotentConsumer({ repository: new MemoryRepository(), id: 'id', ttlMs: 60000 });
         const handle = consumer.wrap(async () => {});
         console.log((await handle({ id: 'a' })).outcome, (await handle({ id: 'a' })).outcome);`,
      );
      assert.equal(run.status, 0, run.stderr);
      assert.equal(run.stdout.trim(), 'processed duplicate');
    });

    it('the Redis store works', { skip: skipUnlessEnabled('redis') }, () => {
      const run = node(
        installedProject('no-optional'),
        `import { IdempotentConsumer } from 'idempotent-consumer';
         import { RedisRepository } from 'idempotent-consumer/redis';
         const repository = await RedisRepository.open({ url: ${JSON.stringify(endpoints.redisUrl)}, keyPrefix: 'pkg-${randomUUID()}:' });
         const consumer = new IdempotentConsumer({ repository, id: 'id', ttlMs: 60000 });
         const handle = consumer.wrap(async () => {});
         console.log((await handle({ id: 'a' })).outcome, (await handle({ id: 'a' })).outcome);
         await repository.clear();
         await repository.close();`,
      );
      assert.equal(run.status, 0, run.stderr);
      assert.equal(run.stdout.trim(), 'processed duplicate');
    });
  });
});
