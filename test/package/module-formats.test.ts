import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { cleanEnv, installedProject, root } from './pack.js';

/** Every entry point of the package, by subpath. */
const entryPoints = [
  '',
  'memory',
  'rocksdb',
  'redis',
  'dynamodb',
  'cassandra',
  'postgres',
  'mysql',
  'kafka-repository',
  'kafka',
  'http',
  'config',
  'di',
  'contract',
];
/** Entry points whose client library the probe project does not install: resolved, not loaded. */
const resolveOnly = new Set(['dynamodb', 'cassandra', 'postgres', 'mysql', 'kafka-repository', 'kafka']);

const specifier = (entry: string) => (entry ? `idempotent-consumer/${entry}` : 'idempotent-consumer');

// One TypeScript program for every setting: the compiler turns the imports into require() where the setting says
// CommonJS. The type-only imports make every entry point's declarations resolve (or fail to compile), and the
// expect-error proves they are real types rather than `any`.
const program = `
import { IdempotentConsumer } from 'idempotent-consumer';
import type * as cassandra from 'idempotent-consumer/cassandra';
import type * as config from 'idempotent-consumer/config';
import type * as contract from 'idempotent-consumer/contract';
import type * as di from 'idempotent-consumer/di';
import type * as dynamodb from 'idempotent-consumer/dynamodb';
import type * as http from 'idempotent-consumer/http';
import type * as kafka from 'idempotent-consumer/kafka';
import { MemoryRepository } from 'idempotent-consumer/memory';
import type * as mysql from 'idempotent-consumer/mysql';
import type * as postgres from 'idempotent-consumer/postgres';
import type * as redis from 'idempotent-consumer/redis';
import type * as rocksdb from 'idempotent-consumer/rocksdb';

export type EntryPoints = [
  typeof cassandra.CassandraRepository,
  typeof config.loadConfig,
  typeof contract.repositoryContract,
  typeof di.buildContainer,
  typeof dynamodb.DynamoDbRepository,
  typeof http.idempotencyKey,
  typeof http.fastifyIdempotencyKey,
  typeof kafka.runIdempotentConsumer,
  typeof mysql.MySqlRepository,
  typeof postgres.PostgresRepository,
  typeof redis.RedisRepository,
  typeof rocksdb.RocksdbRepository,
];

export function typesAreReal(consumer: IdempotentConsumer<{ id: string }>): void {
  // @ts-expect-error: not a method of IdempotentConsumer
  consumer.noSuchMethod();
}

// @ts-expect-error: the http entry point's types are real too, not any (ttlMs is a number)
export const badHttpOptions: Partial<http.HttpIdempotencyOptions> = { ttlMs: 'soon' };

const consumer = new IdempotentConsumer<{ id: string }>({ repository: new MemoryRepository(), id: 'id', ttlMs: 60_000 });
consumer.wrap(async () => {})({ id: 'a' }).then((result) => console.log(result.outcome));
`;

/** TypeScript settings a user may have, each with the package.json "type" of the user's project. */
const settings: Array<{ name: string; type: 'module' | 'commonjs'; options: Record<string, string> }> = [
  {
    name: 'nodenext, ESM project',
    type: 'module',
    options: { module: 'nodenext', moduleResolution: 'nodenext' },
  },
  {
    name: 'nodenext, CommonJS project',
    type: 'commonjs',
    options: { module: 'nodenext', moduleResolution: 'nodenext' },
  },
  { name: 'node16, ESM project', type: 'module', options: { module: 'node16', moduleResolution: 'node16' } },
  {
    name: 'node16, CommonJS project',
    type: 'commonjs',
    options: { module: 'node16', moduleResolution: 'node16' },
  },
  { name: 'bundler', type: 'module', options: { module: 'esnext', moduleResolution: 'bundler' } },
  // NestJS's default: module commonjs, hence node10 resolution, which ignores "exports".
  { name: 'module commonjs (node10 resolution)', type: 'commonjs', options: { module: 'commonjs' } },
];

const tsc = join(root, 'node_modules/typescript/bin/tsc');

/** A fresh directory inside the installed project, so it resolves the project's node_modules. */
function freshDir(project: string, type: 'module' | 'commonjs'): string {
  mkdirSync(join(project, 'formats'), { recursive: true });
  const dir = mkdtempSync(join(project, 'formats', 'p-'));
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ type })}\n`);
  return dir;
}

function run(dir: string, file: string): string {
  const result = spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8', env: cleanEnv() });
  assert.equal(result.status, 0, `node ${file} failed:\n${result.stderr}`);
  return result.stdout.trim();
}

describe("package.json's entry points", () => {
  it('are all in this matrix, each with an ES module and a CommonJS build with types, and a typesVersions entry', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      exports: Record<string, unknown>;
      typesVersions: { '*': Record<string, unknown> };
    };
    const subpaths = Object.keys(pkg.exports).filter((key) => key !== './package.json');
    assert.deepEqual(subpaths.map((key) => key.replace(/^\.\/?/, '')).sort(), [...entryPoints].sort());
    for (const key of subpaths) {
      const target = pkg.exports[key] as Record<string, { types?: string; default?: string }>;
      for (const condition of ['import', 'require']) {
        assert.ok(
          target[condition]?.types && target[condition]?.default,
          `${key}: ${condition} build and types`,
        );
      }
      if (key !== '.') assert.ok(pkg.typesVersions['*'][key.slice(2)], `${key}: typesVersions (node10)`);
    }
  });
});

describe('every entry point under every module setting (packed tarball)', () => {
  for (const setting of settings) {
    it(`TypeScript ${setting.name}: compiles with types and runs`, () => {
      const dir = freshDir(installedProject('full'), setting.type);
      try {
        writeFileSync(join(dir, 'main.ts'), program);
        const tsconfig = {
          compilerOptions: {
            ...setting.options,
            target: 'ES2022',
            strict: true,
            skipLibCheck: true,
            types: ['node'],
            typeRoots: [join(root, 'node_modules/@types')],
          },
          files: ['main.ts'],
        };
        writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
        const compiled = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json'], {
          cwd: dir,
          encoding: 'utf8',
        });
        assert.equal(
          compiled.status,
          0,
          `tsc (${setting.name}) failed:\n${compiled.stdout}${compiled.stderr}`,
        );
        assert.equal(run(dir, 'main.js'), 'processed');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it('ESM import: every entry point loads its ES module build', () => {
    const dir = freshDir(installedProject('full'), 'module');
    try {
      writeFileSync(
        join(dir, 'main.mjs'),
        `import assert from 'node:assert/strict';
        import { existsSync } from 'node:fs';
        import { fileURLToPath } from 'node:url';
        for (const [entry, loadIt] of ${JSON.stringify(entryPoints.map((e) => [specifier(e), !resolveOnly.has(e)]))}) {
          const file = fileURLToPath(import.meta.resolve(entry));
          assert.ok(existsSync(file) && !file.includes('/dist/cjs/'), entry + ' -> ' + file);
          if (loadIt) await import(entry);
        }
        const { IdempotentConsumer } = await import('idempotent-consumer');
        const { MemoryRepository } = await import('idempotent-consumer/memory');
        const consumer = new IdempotentConsumer({ repository: new MemoryRepository(), id: 'id', ttlMs: 60000 });
        console.log((await consumer.wrap(async () => {})({ id: 'a' })).outcome);`,
      );
      assert.equal(run(dir, 'main.mjs'), 'processed');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('CommonJS require: every entry point loads its CommonJS build (no require(esm))', () => {
    const dir = freshDir(installedProject('full'), 'commonjs');
    try {
      writeFileSync(
        join(dir, 'main.cjs'),
        `const assert = require('node:assert/strict');
        const { existsSync } = require('node:fs');
        for (const [entry, loadIt] of ${JSON.stringify(entryPoints.map((e) => [specifier(e), !resolveOnly.has(e)]))}) {
          const file = require.resolve(entry);
          assert.ok(existsSync(file) && file.includes('/dist/cjs/'), entry + ' -> ' + file);
          if (loadIt) require(entry);
        }
        const { IdempotentConsumer } = require('idempotent-consumer');
        const { MemoryRepository } = require('idempotent-consumer/memory');
        const consumer = new IdempotentConsumer({ repository: new MemoryRepository(), id: 'id', ttlMs: 60000 });
        consumer.wrap(async () => {})({ id: 'a' }).then((result) => console.log(result.outcome));`,
      );
      // --no-experimental-require-module: the CommonJS build must not lean on require(esm) where Node has it.
      const result = spawnSync(process.execPath, ['--no-experimental-require-module', 'main.cjs'], {
        cwd: dir,
        encoding: 'utf8',
        env: cleanEnv(),
      });
      assert.equal(result.status, 0, result.stderr);
      assert.equal(result.stdout.trim(), 'processed');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the README's first command (packed tarball)", () => {
  it('npx idem dedup --id id events.ndjson exits 0 in a fresh directory and the summary names the store', () => {
    const project = installedProject('full');
    const dir = mkdtempSync(join(project, 'first-'));
    try {
      copyFileSync(join(root, 'examples/events.ndjson'), join(dir, 'events.ndjson'));
      const first = spawnSync('npx', ['--no', '--', 'idem', 'dedup', '--id', 'id', 'events.ndjson'], {
        cwd: dir,
        encoding: 'utf8',
        env: cleanEnv(),
      });
      assert.equal(first.status, 0, first.stderr);
      assert.match(first.stderr, /store \.idem-store \(RocksDB\)/);
      assert.ok(existsSync(join(dir, '.idem-store')));
      const again = execFileSync('npx', ['--no', '--', 'idem', 'dedup', '--id', 'id', 'events.ndjson'], {
        cwd: dir,
        encoding: 'utf8',
        env: cleanEnv(),
      });
      assert.equal(again, '', 'a second run finds every line a duplicate');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
