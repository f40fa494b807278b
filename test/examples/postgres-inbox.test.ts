import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { EnvError, redactUrl, workerConfig } from '../../examples/postgres-inbox/worker.js';
import { soakSize } from '../helpers/soak.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { killRun } from './inbox-kill-run.js';

// examples/postgres-inbox/worker.ts: its environment, and the SIGKILL run on PostgreSQL. The same run
// with IDEM_STORE=redis is reported by `npm run bench:inbox` (not asserted: it leaves duplicates by design).

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const base = { DATABASE_URL: 'postgres://app:s3cret@db.internal:5432/app', TOPIC: 'payments', GROUP_ID: 'g' };

describe('examples/postgres-inbox: environment', () => {
  it('reads the settings, with the documented defaults', () => {
    assert.deepEqual(workerConfig(base), {
      databaseUrl: base.DATABASE_URL,
      kafkaBrokers: ['127.0.0.1:9092'],
      topic: 'payments',
      groupId: 'g',
      store: 'postgres',
      redisUrl: '',
    });
    const redis = workerConfig({ ...base, IDEM_STORE: 'redis', KAFKA_BROKERS: 'k1:9092, k2:9093' });
    assert.equal(redis.redisUrl, 'redis://127.0.0.1:6379');
    assert.deepEqual(redis.kafkaBrokers, ['k1:9092', 'k2:9093']);
  });

  it('names the bad variable and never shows a password', () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ ...base, TOPIC: '' }, /^TOPIC: is required$/],
      [{ ...base, TOPIC: 'a b' }, /^TOPIC: must be/],
      [{ ...base, GROUP_ID: ' ' }, /^GROUP_ID: is required$/],
      [{ ...base, DATABASE_URL: 'mysql://app:s3cret@db/app' }, /^DATABASE_URL: must be a postgres:\/\//],
      [{ ...base, DATABASE_URL: 'postgres//app:s3cret@db' }, /^DATABASE_URL: is not a URL/],
      [{ ...base, KAFKA_BROKERS: 'k1:9092,k2' }, /^KAFKA_BROKERS: "k2" is not host:port/],
      [{ ...base, IDEM_STORE: 'mysql' }, /^IDEM_STORE: must be postgres or redis$/],
      [{ ...base, IDEM_STORE: 'redis', REDIS_URL: 'http://:s3cret@r' }, /^REDIS_URL: must be a redis:\/\//],
    ];
    for (const [env, message] of cases) {
      assert.throws(
        () => workerConfig(env),
        (error: unknown) =>
          error instanceof EnvError && message.test(error.message) && !error.message.includes('s3cret'),
      );
    }
    assert.equal(redactUrl(base.DATABASE_URL), 'postgres://app:***@db.internal:5432/app');
  });

  it('exits 2 with one line naming the variable', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'examples/postgres-inbox/worker.ts'], {
      cwd: ROOT,
      env: { ...process.env, ...base, DATABASE_URL: 'postgresx://app:s3cret@db/app', TOPIC: 'payments' },
      encoding: 'utf8',
    });
    assert.equal(run.status, 2);
    assert.equal(run.stderr, 'postgres-inbox: DATABASE_URL: must be a postgres:// or postgresql:// URL\n');
    const missing = spawnSync(process.execPath, ['--import', 'tsx', 'examples/postgres-inbox/worker.ts'], {
      cwd: ROOT,
      env: { ...process.env, ...base, TOPIC: '' },
      encoding: 'utf8',
    });
    assert.equal(missing.status, 2);
    assert.equal(missing.stderr, 'postgres-inbox: TOPIC: is required\n');
  });
});

/**
 * SIGKILLs of the worker. Each lands 0–1 s after the worker made progress, so inside a run of transactions; a
 * mark committed apart from its row shows as a duplicate or a missing row on any one of them. Each kill costs the
 * successor a wait for the dead member's 10 s session, which is what the file's time is: 5 kills keep five random
 * cut points at half the time; the soak size is what CI ran before.
 */
const KILLS = soakSize('INBOX_KILLS', { ci: 5, soak: 10 });

describe('examples/postgres-inbox: SIGKILLed at random moments', {
  skip: skipUnlessEnabled('postgres') || skipUnlessEnabled('kafka'),
}, () => {
  it(`ends with exactly one row per distinct id (20,000 records, 10 % repeated, ${KILLS} kills)`, async (t) => {
    const report = await killRun({
      kills: KILLS,
      store: 'postgres',
      databaseUrl: endpoints.postgresUrl,
      kafkaBrokers: endpoints.kafkaBrokers,
      redisUrl: endpoints.redisUrl,
      log: (line) => t.diagnostic(line),
    });
    t.diagnostic(
      `postgres: ${report.kills} kills in ${(report.elapsedMs / 1000).toFixed(1)} s; ${report.rows} rows for ` +
        `${report.distinctIds} distinct ids of ${report.records} records; ${report.extraRows} duplicate rows ` +
        `(seed ${report.seed})`,
    );
    assert.ok(report.kills >= KILLS, `${report.kills} kills`);
    assert.deepEqual(report.duplicatedIds, [], 'SELECT message_id … HAVING count(*) > 1 is empty');
    assert.equal(report.rows, report.distinctIds, 'one row per distinct id');
    assert.equal(report.missingIds, 0, 'every distinct id has its row');
    assert.equal(report.wrongAmounts, 0, 'every row has its record’s amount');
    assert.equal(report.exitCode, 0, 'the last worker stopped cleanly on SIGTERM');
  });
});
