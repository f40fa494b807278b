import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
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

/** tsc's problems (`--pretty false`, one per entry with its continuation lines), by the file they are in. */
let problems: string[] = [];

describe('each entry point needs the types of its own client only (skipLibCheck: false, packed tarball)', () => {
  before(() => {
    const project = installedProject('typed-clients');
    assert.equal(existsSync(join(project, 'node_modules/fastify')), false, 'fastify is not installed');
    assert.equal(existsSync(join(project, 'node_modules/kafkajs')), false, 'kafkajs is not installed');
    mkdirSync(join(project, 'apps'), { recursive: true });
    const dir = mkdtempSync(join(project, 'apps', 'app-'));
    try {
      writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ type: 'module' })}\n`);
      writeFileSync(join(dir, 'express-app.ts'), expressApp);
      writeFileSync(join(dir, 'postgres-app.ts'), postgresApp);
      writeFileSync(join(dir, 'kafka-app.ts'), kafkaApp);
      const tsconfig = {
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'ES2022',
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          // Only what the apps import (and what that references): no other @types of the project.
          types: [],
        },
        files: ['express-app.ts', 'postgres-app.ts', 'kafka-app.ts'],
      };
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
      const run = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.json', '--pretty', 'false'], {
        cwd: dir,
        encoding: 'utf8',
      });
      problems = `${run.stdout}${run.stderr}`.split(/\n(?=\S)/).filter((line) => line.trim() !== '');
      assert.ok(run.status === 0 || problems.length > 0, `tsc failed without a problem: ${run.status}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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
});
