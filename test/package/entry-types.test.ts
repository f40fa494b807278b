import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { before, describe, it } from 'node:test';
import { installedProject, root } from './pack.js';

// A user's project may type-check its node_modules too (`skipLibCheck: false`): importing one adapter or store
// must need the types of that one client only. The project has Express, pg and their @types, and no fastify.
// One compiler run checks both apps (tsc is the slow part); each test reads the problems that concern it.

const tsc = join(root, 'node_modules/typescript/bin/tsc');

/** An Express app importing the http entry point, as docs/http.md shows it. */
const expressApp = `import express, { type Request } from 'express';
import { MemoryRepository } from 'idempotent-consumer/memory';
import { idempotencyKey } from 'idempotent-consumer/http';

const app = express();
const repository = new MemoryRepository();
app.post('/charges', express.json(), idempotencyKey({ repository }), (_req, res) => {
  res.status(201).json({ ok: true });
});
// The hooks see Express's own request when asked for it.
const scoped = idempotencyKey<Request>({ repository, scope: (req) => req.get('x-tenant') ?? '' });
app.use(scoped);
export const stats = scoped.idempotency;
// @ts-expect-error: the options are typed, not any (ttlMs is a number)
idempotencyKey({ repository, ttlMs: 'soon' });
`;

/** A PostgreSQL app, as docs/postgres.md and docs/transactions.md show it. */
const postgresApp = `import pg from 'pg';
import { PostgresRepository, postgresTransaction } from 'idempotent-consumer/postgres';

const pool = new pg.Pool();
const repository = await PostgresRepository.open({ pool, table: 'idem_inbox' });
export function inTransaction(context: { readonly transaction?: unknown }): Promise<pg.QueryResult> {
  return postgresTransaction(context).query('SELECT 1');
}
// @ts-expect-error: postgresTransaction answers a pg client, not any
export const notAny: number = postgresTransaction({});
await repository.close();
`;

/**
 * A Kafka adapter app on the default client (`@platformatic/kafka`, connection settings), as docs/kafka.md shows
 * it: its types must not reach kafkajs, which the project does not have.
 */
const kafkaApp = `import { MemoryRepository } from 'idempotent-consumer/memory';
import { IdempotentConsumer } from 'idempotent-consumer';
import { type KafkaRecord, kafkaRecordId, runIdempotentConsumer } from 'idempotent-consumer/kafka';

const idempotent = new IdempotentConsumer<KafkaRecord>({ repository: new MemoryRepository(), id: kafkaRecordId });
export const running = await runIdempotentConsumer({
  kafka: { brokers: ['localhost:9092'] },
  topics: ['orders'],
  groupId: 'billing',
  idempotent,
  handler: (record) => record.message.value?.toString(),
});
// @ts-expect-error: the options are typed, not any (topics is a list)
runIdempotentConsumer({ kafka: { brokers: ['b:9092'] }, topics: 'orders', groupId: 'g', idempotent, handler: () => 1 });
`;

/**
 * The PostgreSQL app of a project that has pg but not @types/pg, compiled with `skipLibCheck: true` (the common
 * setting, under which the entry point's declarations are not checked): the client must not be a silent `any`.
 */
const untypedPgApp = `import { postgresTransaction } from 'idempotent-consumer/postgres';

export function inTransaction(context: { readonly transaction?: unknown }) {
  return postgresTransaction(context).query('SELECT 1');
}
`;

/** tsc's problems (`--pretty false`, one per entry with its continuation lines), by the file they are in. */
let problems: string[] = [];

/** Runs tsc on `files` (name -> text) in a new directory of `project`; answers its problems. */
function compile(
  project: string,
  files: Record<string, string>,
  compilerOptions: Record<string, unknown>,
): string[] {
  mkdirSync(join(project, 'apps'), { recursive: true });
  const dir = mkdtempSync(join(project, 'apps', 'app-'));
  try {
    writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ type: 'module' })}\n`);
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    const tsconfig = {
      compilerOptions: {
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'ES2022',
        strict: true,
        noEmit: true,
        // Only what the apps import (and what that references): no other @types of the project.
        types: [],
        ...compilerOptions,
      },
      files: Object.keys(files),
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
    const run = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json', '--pretty', 'false'], {
      cwd: dir,
      encoding: 'utf8',
    });
    const found = `${run.stdout}${run.stderr}`.split(/\n(?=\S)/).filter((line) => line.trim() !== '');
    assert.ok(run.status === 0 || found.length > 0, `tsc failed without a problem: ${run.status}`);
    return found;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('each entry point needs the types of its own client only (skipLibCheck: false, packed tarball)', () => {
  let project = '';
  before(() => {
    project = installedProject('typed-clients');
    assert.equal(existsSync(join(project, 'node_modules/fastify')), false, 'fastify is not installed');
    assert.equal(existsSync(join(project, 'node_modules/kafkajs')), false, 'kafkajs is not installed');
    problems = compile(
      project,
      { 'express-app.ts': expressApp, 'postgres-app.ts': postgresApp, 'kafka-app.ts': kafkaApp },
      { skipLibCheck: false },
    );
  });

  const concerning = (mine: RegExp, theirs: RegExp) =>
    problems.filter((line) => mine.test(line) || !theirs.test(line));
  const kafka = /^kafka-app\.ts|dist\/adapters\/kafka\/|dist\/kafka\/|kafkajs/;

  it('an Express app imports idempotent-consumer/http with @types/express and without fastify', () => {
    const found = concerning(
      /^express-app\.ts|dist\/adapters\/http\//,
      new RegExp(`^postgres-app\\.ts|repositories\\/postgres\\/|${kafka.source}`),
    );
    assert.deepEqual(found, [], found.join('\n'));
  });

  it('the postgres entry point type-checks with pg and @types/pg (docs/postgres.md names @types/pg)', () => {
    const found = concerning(
      /^postgres-app\.ts|repositories\/postgres\//,
      new RegExp(`^express-app\\.ts|dist\\/adapters\\/http\\/|${kafka.source}`),
    );
    assert.deepEqual(found, [], found.join('\n'));
  });

  it('a Kafka adapter app on the default client type-checks without kafkajs (no kafkajs type reachable)', () => {
    const found = concerning(
      kafka,
      /^express-app\.ts|dist\/adapters\/http\/|^postgres-app\.ts|repositories\/postgres\//,
    );
    assert.deepEqual(found, [], found.join('\n'));
  });

  it("every entry point's declarations import no package but its own client's (and zod, node:)", () => {
    const installed = join(project, 'node_modules/idempotent-consumer');
    type Target = { import?: { types?: string }; require?: { types?: string } };
    const { exports } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      exports: Record<string, Target | string>;
    };
    const entries = Object.entries(exports).filter(
      (entry): entry is [string, Target] => typeof entry[1] === 'object',
    );
    assert.deepEqual(
      entries.map(([path]) => path).sort(),
      Object.keys(ownClients).sort(),
      'an entry point without its line in ownClients',
    );
    for (const [path, target] of entries) {
      for (const types of [target.import?.types, target.require?.types]) {
        assert.ok(types, `${path} has no types`);
        const foreign = [...packagesReached(join(installed, types))].filter(
          (name) => name !== 'zod' && !name.startsWith('node:') && !ownClients[path]?.includes(name),
        );
        assert.deepEqual(foreign, [], `${types} reaches ${foreign.join(', ')}`);
      }
    }
  });

  it('without @types/pg (skipLibCheck: true) the transaction client is no silent any: its first use names @types/pg', () => {
    // The project's pg as one without @types/pg has it: its JavaScript alone.
    const untyped = compile(
      project,
      { 'untyped-pg-app.ts': untypedPgApp },
      { skipLibCheck: true, paths: { pg: [join(project, 'node_modules/pg/lib/index.js')] } },
    );
    assert.equal(untyped.length, 1, untyped.join('\n'));
    assert.match(
      untyped[0] as string,
      /^untyped-pg-app\.ts\(4,.*'query' does not exist.*npm install -D @types\/pg/,
    );
  });
});

/**
 * The client packages each entry point's declarations may import (besides zod and node:): its own, never another
 * entry point's (the http adapter neither Express's nor Fastify's types; the Kafka ones not kafkajs's, which the
 * default client's users do not have).
 */
const ownClients: Record<string, readonly string[]> = {
  '.': [],
  './memory': [],
  './rocksdb': ['@nxtedition/rocksdb'],
  './redis': ['ioredis'],
  './dynamodb': ['@aws-sdk/client-dynamodb'],
  './cassandra': ['cassandra-driver'],
  './postgres': ['pg'],
  './mysql': ['mysql2'],
  './kafka-repository': ['@platformatic/kafka'],
  './http': [],
  './kafka': ['@platformatic/kafka'],
  './config': [],
  './di': ['tsyringe', 'reflect-metadata'],
  './contract': [],
};

/** The packages (by name) that a declaration file and the ones it imports, relatively, import. */
function packagesReached(entry: string): Set<string> {
  // Import and export statements, import() types and type references; not a key named `from` in a type.
  const specifier =
    /^\s*(?:import|export)\b[^;'"]*?\bfrom\s*['"]([^'"\n]+)['"]|^\s*import\s*['"]([^'"\n]+)['"]|\bimport\(\s*['"]([^'"\n]+)['"]\s*\)|^\/\/\/\s*<reference\s+types=['"]([^'"\n]+)['"]/gm;
  const names = new Set<string>();
  const seen = new Set<string>();
  const todo = [entry];
  for (let file = todo.pop(); file !== undefined; file = todo.pop()) {
    if (seen.has(file)) continue;
    seen.add(file);
    // Without block comments: TSDoc may show an import (`import * as api from '…'`), which imports nothing.
    const code = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '');
    for (const match of code.matchAll(specifier)) {
      const spec = match.slice(1).find((group) => group !== undefined);
      if (spec === undefined) continue;
      if (spec.startsWith('.')) todo.push(join(dirname(file), spec.replace(/\.(c?)js$/, '.d.$1ts')));
      else
        names.add(
          spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] as string),
        );
    }
  }
  return names;
}
