/**
 * The PostgreSQL table is created only by an explicit, idempotent migration: `migrate()`, the exported DDL, and
 * `idem migrate --store postgres://… [--table T] [--apply]`. A missing table (or one of another shape) fails at
 * open, naming the table and the command that creates it.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { ConfigError, RepositoryError } from '../../src/errors.js';
import {
  migrate,
  PostgresRepository,
  schemaScript,
  schemaStatements,
} from '../../src/repositories/postgres/index.js';
import { pastedCommand, runCli } from '../cli/run-cli.js';
import { testPool, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/** Runs the CLI and reports the timers and sockets it left behind (`leftover: …`, exit 99). */

/** The stack's URL with its password (also its user and database name: searched as `:password@`). */
const url = endpoints.postgresUrl;
const password = decodeURIComponent(new URL(url).password);

describe('postgres migration', { skip: skipUnlessEnabled('postgres') }, () => {
  const pool = testPool(2);
  const dropped: string[] = [];
  after(async () => {
    for (const name of dropped) await pool.query(`DROP TABLE IF EXISTS ${name}`);
    await pool.query(`DROP SCHEMA IF EXISTS ${schemaName} CASCADE`);
    await pool.end();
  });
  const schemaName = `idem_schema_${randomUUID().replaceAll('-', '').slice(0, 8)}`;

  async function exists(table: string): Promise<boolean> {
    const { rows } = await pool.query('SELECT to_regclass($1) IS NOT NULL AS present', [table]);
    return rows[0].present as boolean;
  }

  it('the DDL: the table, its purge index, and the schema of a qualified name; bad names refused', () => {
    const script = schemaScript();
    assert.match(script, /^CREATE TABLE IF NOT EXISTS "processed_ids" \(/);
    assert.match(script, /PRIMARY KEY \(namespace, id\)/);
    assert.match(
      script,
      /CREATE INDEX IF NOT EXISTS "processed_ids_forget_at" ON "processed_ids" \(forget_at\);\n\n/,
    );
    assert.deepEqual(
      schemaStatements('app.inbox').map((s) => s.split('\n')[0]),
      [
        'CREATE SCHEMA IF NOT EXISTS "app"',
        'CREATE TABLE IF NOT EXISTS "app"."inbox" (',
        'CREATE INDEX IF NOT EXISTS "inbox_forget_at" ON "app"."inbox" (forget_at)',
        'ALTER TABLE "app"."inbox" ADD COLUMN IF NOT EXISTS first_seen_at double precision',
      ],
    );
    for (const bad of ['x"; DROP TABLE y; --', 'a.b.c', '1abc', '', 'a'.repeat(49)]) {
      assert.throws(() => schemaStatements(bad), ConfigError, bad);
    }
  });

  it('migrate() creates the table once; running it again, and from several processes at once, changes nothing', async () => {
    const table = testTable('mig');
    dropped.push(table);
    const first = await migrate({ url, table });
    assert.equal(first.statements.length, 3);
    assert.equal(await exists(table), true);
    const repository = await PostgresRepository.open({ url, table });
    await repository.add('kept', { ttlMs: 60_000 });
    await Promise.all(Array.from({ length: 4 }, () => migrate({ url, table })));
    assert.equal(await repository.contains('kept'), true, 'a second migration lost rows');
    await repository.close();
  });

  /** Opens a transaction that has written to `table` (as a worker's does) and keeps it open until `end()`. */
  async function openWriter(table: string) {
    const client = await pool.connect();
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO ${table} (namespace, id, state, expires_at, forget_at) VALUES ('w', $1, 'confirmed', 0, 0)`,
      [randomUUID()],
    );
    let ended = false;
    return {
      async end() {
        if (ended) return;
        ended = true;
        await client.query('ROLLBACK');
        client.release();
      },
    };
  }

  it('running the migration again beside an open transaction on the table takes no lock and waits for none', async (t) => {
    const table = testTable('busy');
    dropped.push(table);
    await migrate({ url, table });
    const writer = await openWriter(table);
    t.after(() => writer.end());
    // CREATE INDEX IF NOT EXISTS would wait behind the writer for its ShareLock (the store's lock timeout, 5 s),
    // then fail, and every other writer would queue behind it meanwhile.
    const repository = await PostgresRepository.open({ url, table, createTable: true, lockTimeoutMs: 1_000 });
    t.after(() => repository.close());
    assert.equal((await repository.add(randomUUID(), { ttlMs: 60_000 })).added, true);
    const again = await migrate({ url, table });
    assert.deepEqual(again.applied, [], 'a statement ran on a table that had every object');
    assert.equal(again.statements.length, 3);
    const cli = await runCli(['migrate', '--store', url, '--table', table, '--apply']);
    assert.equal(cli.code, 0, cli.stderr);
  });

  it('a migration that times out on a lock says the table is in use, not that it cannot connect', async (t) => {
    const table = testTable('inuse');
    dropped.push(table);
    await migrate({ url, table });
    await pool.query(`DROP INDEX ${table}_forget_at`);
    const writer = await openWriter(table);
    t.after(() => writer.end());
    await assert.rejects(
      PostgresRepository.open({ url, table, createTable: true, lockTimeoutMs: 300 }),
      (error: unknown) => {
        assert.ok(error instanceof RepositoryError, String(error));
        assert.match(error.message, new RegExp(`the table ${table} is in use`));
        assert.doesNotMatch(error.message, /cannot connect|repository\.url/);
        return true;
      },
    );
    await writer.end();
    // Once the transaction ended, the missing index alone is created.
    const done = await migrate({ url, table });
    assert.equal(done.applied.length, 1);
    assert.match(done.applied[0] as string, /^CREATE INDEX IF NOT EXISTS/);
  });

  it('a schema-qualified table: created with its schema by createTable, used like any other', async () => {
    const table = `${schemaName}.inbox`;
    const repository = await PostgresRepository.open({ url, table, createTable: true });
    assert.equal(await exists(table), true);
    assert.equal((await repository.add('a', { ttlMs: 60_000 })).added, true);
    assert.equal((await repository.add('a', { ttlMs: 60_000 })).added, false);
    await repository.close();
  });

  it('open() refuses a missing table, naming it and the command that creates it, and creates nothing', async () => {
    const table = testTable('missing');
    const error = await PostgresRepository.open({ url, table }).then(
      () => assert.fail('opened without a table'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ConfigError);
    assert.equal(error.key, 'repository.table');
    assert.match(error.message, new RegExp(`table "${table}" does not exist`));
    assert.match(
      error.message,
      new RegExp(`idem migrate --store postgres://[^ ]+/idem --table ${table} --apply`),
    );
    assert.ok(!error.message.includes(`:${password}@`), 'the message quotes the password');
    assert.equal(await exists(table), false);
  });

  it('a table of an older version (no first_seen_at): open() says to migrate, migrate() adds the column', async () => {
    const table = testTable('older');
    dropped.push(table);
    await migrate({ url, table });
    // The table as 0.1.0 made it, with one of its rows.
    await pool.query(`ALTER TABLE ${table} DROP COLUMN first_seen_at`);
    await pool.query(
      `INSERT INTO ${table} (namespace, id, state, expires_at, forget_at) VALUES ('default', 'old', 'confirmed', $1, $1)`,
      [Date.now() + 60_000],
    );
    await assert.rejects(PostgresRepository.open({ url, table }), (e: unknown) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.match(e.message, /predates column first_seen_at; add it with `idem migrate --store /);
      return true;
    });
    const upgraded = await migrate({ url, table });
    assert.deepEqual(upgraded.applied, [
      `ALTER TABLE "${table}" ADD COLUMN IF NOT EXISTS first_seen_at double precision`,
    ]);
    const repository = await PostgresRepository.open({ url, table });
    try {
      const old = await repository.get('old');
      assert.equal(old?.state, 'confirmed');
      assert.equal(old?.firstSeenAt, undefined, "an older version's row has no first-seen time");
      const added = await repository.add('new', { ttlMs: 60_000, now: 1_700_000_000_000 });
      assert.equal(added.added && added.record.firstSeenAt, 1_700_000_000_000);
    } finally {
      await repository.close();
    }
  });

  it('open() refuses a table of another shape', async () => {
    const table = testTable('shape');
    dropped.push(table);
    await pool.query(
      `CREATE TABLE ${table} (namespace text, id text, state text, PRIMARY KEY (namespace, id))`,
    );
    await assert.rejects(
      PostgresRepository.open({ url, table }),
      (e: unknown) => e instanceof ConfigError && /expected layout: column expires_at/.test(e.message),
    );
  });

  it('idem migrate prints the DDL (creating nothing), --apply runs it, and neither prints the password', async () => {
    const table = testTable('cli');
    dropped.push(table);
    const printed = await runCli(['migrate', '--store', url, '--table', table]);
    assert.equal(printed.code, 0, printed.stderr);
    assert.equal(printed.stdout, schemaScript(table));
    assert.equal(await exists(table), false, 'printing the DDL created the table');
    const applied = await runCli(['migrate', '--store', url, '--table', table, '--apply']);
    assert.equal(applied.code, 0, applied.stderr);
    assert.equal(await exists(table), true);
    assert.match(
      applied.stderr,
      new RegExp(`postgres table ${table} is ready at postgres://127\\.0\\.0\\.1:\\d+/idem`),
    );
    const again = await runCli(['migrate', '--store', url, '--table', table, '--apply']);
    assert.equal(again.code, 0, again.stderr);
    for (const out of [printed, applied, again]) {
      assert.ok(!`${out.stdout}${out.stderr}`.includes(`:${password}@`), 'the password was printed');
    }
  });

  it('idem dedup --store postgres://… keeps its seen ids in that database, and its summary hides the password', async () => {
    const table = testTable('dedup');
    dropped.push(table);
    await migrate({ url, table });
    const input = '{"id":"a"}\n{"id":"b"}\n{"id":"a"}\n';
    const env = { IDEM__REPOSITORY__TABLE: table };
    const first = await runCli(['dedup', '--id', 'id', '--no-progress', '--store', url], { input, env });
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.stdout, '{"id":"a"}\n{"id":"b"}\n');
    assert.match(first.stderr, /store postgres at postgres:\/\/idem:\[redacted\]@127\.0\.0\.1:\d+\/idem/);
    const second = await runCli(['dedup', '--id', 'id', '--no-progress', '--store', url], { input, env });
    assert.equal(second.code, 0, second.stderr);
    assert.equal(second.stdout, '', 'a second run wrote ids the first one marked');
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM ${table}`);
    assert.equal(rows[0].n, 2);
  });

  it('idem migrate refuses an unknown store, a bad table name and wrong credentials (exit 2)', async () => {
    const noStore = await runCli(['migrate']);
    assert.equal(noStore.code, 2);
    assert.match(noStore.stderr, /--store: is required/);
    const redis = await runCli(['migrate', '--store', 'redis://127.0.0.1:6379']);
    assert.equal(redis.code, 2);
    assert.match(redis.stderr, /postgres:\/\//);
    const badTable = await runCli(['migrate', '--store', url, '--table', 'x;drop']);
    assert.equal(badTable.code, 2);
    const wrong = new URL(url);
    wrong.password = 'not-the-password-3f9a';
    const denied = await runCli(['migrate', '--store', wrong.href, '--apply']);
    assert.equal(denied.code, 2, denied.stderr);
    assert.match(denied.stderr, /repository\.password: authentication/);
    assert.ok(!denied.stderr.includes('not-the-password-3f9a'), 'the password was printed');
  });

  it('a URL without password and no PGPASSWORD: a ConfigError on repository.password saying where one goes (exit 2)', async () => {
    const bare = new URL(url);
    bare.password = '';
    const table = testTable('nopass');
    dropped.push(table);
    const where = /repository\.password: .*asks for a password.*the URL.*repository\.password.*PGPASSWORD/;
    const saved = process.env.PGPASSWORD;
    delete process.env.PGPASSWORD;
    try {
      const error = await PostgresRepository.open({ url: bare.href, table }).then(
        () => assert.fail('opened without a password'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.key, 'repository.password');
      assert.equal(error.retryable, false);
      assert.match(error.message, where);
    } finally {
      if (saved !== undefined) process.env.PGPASSWORD = saved;
    }
    const refused = await runCli(['migrate', '--store', bare.href, '--table', table, '--apply'], {
      env: { PGPASSWORD: '' },
    });
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, where);
    assert.equal(await exists(table), false);
    // The documented way: the password in PGPASSWORD, the URL without it.
    const viaEnv = await runCli(['migrate', '--store', bare.href, '--table', table, '--apply'], {
      env: { PGPASSWORD: password },
    });
    assert.equal(viaEnv.code, 0, viaEnv.stderr);
    assert.equal(await exists(table), true);
  });

  it('a URL without password: the refused connection is hung up, so idem migrate ends at once', async () => {
    const bare = new URL(url);
    bare.password = '';
    // Without the hang-up the socket stays open until the server's authentication_timeout (60 s by default).
    const result = await runCli(
      ['migrate', '--store', bare.href, '--table', testTable('hangup'), '--apply'],
      { env: { PGPASSWORD: '' }, leftovers: true },
    );
    assert.doesNotMatch(result.stderr, /leftover/);
    assert.equal(result.code, 2, result.stderr);
    assert.match(result.stderr, /repository\.password: .*asks for a password/);
  });

  it('the missing-table hint is a command that works when pasted: the user kept, the password left out', async () => {
    const table = testTable('pasted');
    dropped.push(table);
    const error = await PostgresRepository.open({ url, table }).then(
      () => assert.fail('opened without a table'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ConfigError);
    const user = decodeURIComponent(new URL(url).username);
    assert.match(
      error.message,
      new RegExp(`idem migrate --store postgres://${user}@127\\.0\\.0\\.1:\\d+/idem `),
    );
    assert.match(error.message, /with the password in PGPASSWORD/);
    assert.ok(!error.message.includes(`:${password}@`), 'the message quotes the password');
    const pasted = await runCli(pastedCommand(error.message), { env: { PGPASSWORD: password } });
    assert.equal(pasted.code, 0, pasted.stderr);
    assert.equal(await exists(table), true);
    const repository = await PostgresRepository.open({ url, table });
    await repository.close();
  });
});
