/**
 * Opening the MySQL store: the migration (idempotent, printed by schemaScript), the missing-table and wrong-layout
 * errors, the createTable opt-in, TLS against the stack's CA, config selection, and that a URL's password never
 * appears in an error. Also: ids compare byte for byte (no collation).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it, type TestContext } from 'node:test';
import { resolveRepository } from '../../src/config/repository.js';
import { ConfigError, RepositoryError } from '../../src/errors.js';
import {
  MySqlRepository,
  migrate,
  mysqlDefaults,
  schemaScript,
  schemaStatements,
} from '../../src/repositories/mysql/index.js';
import { bucket } from '../../src/repositories/mysql/sql.js';
import { pastedCommand, runCli } from '../cli/run-cli.js';
import { createTestTable, testPool, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;
const SECRET = 'not-the-password-xyzzy';

/** The stack's URL with another password (never the real one in an assertion message). */
function withPassword(password: string): string {
  const url = new URL(endpoints.mysqlUrl);
  url.password = password;
  return url.href;
}

/** Every message along an error's cause chain. */
function messages(error: unknown): string {
  const out: string[] = [];
  for (let e = error; e instanceof Error; e = e.cause) out.push(e.message, String(e.stack));
  return out.join('\n');
}

describe('mysql DDL', () => {
  it('schemaScript is the statements, each ;-terminated, for the given or the default table', () => {
    const script = schemaScript('app.inbox');
    assert.match(script, /^CREATE TABLE IF NOT EXISTS `app`\.`inbox` \(/);
    assert.ok(script.endsWith(';\n'));
    assert.equal(script, `${schemaStatements('app.inbox').join(';\n\n')};\n`);
    assert.match(schemaScript(), new RegExp(`\`${mysqlDefaults.table}\``));
    // The key fits InnoDB's 3072-byte limit: bytes, not utf8mb4 characters.
    assert.match(script, /id VARBINARY\(1024\) NOT NULL/);
    assert.match(script, /PRIMARY KEY \(namespace, id\)/);
  });

  it('refuses a table name that would need more than backquotes', () => {
    for (const bad of ['a-b', 'a.b.c', '1abc', 'x`; DROP TABLE y', '']) {
      assert.throws(() => schemaStatements(bad), ConfigError, bad);
    }
  });

  it('batch statements come in a few sizes: exact up to 8, then four steps per power of two', () => {
    assert.deepEqual(
      [1, 2, 8, 9, 10, 11, 16, 17, 100, 1000, 1024].map(bucket),
      [1, 2, 8, 10, 10, 12, 16, 20, 112, 1024, 1024],
    );
    const sizes = new Set(Array.from({ length: 1024 }, (_, i) => bucket(i + 1)));
    assert.ok(sizes.size <= 40, `${sizes.size} statement sizes`);
  });
});

describe('mysql open', { skip: skipUnlessEnabled('mysql') }, () => {
  const table = testTable('open');
  let drop: (() => Promise<void>) | undefined;
  const pool = testPool(1);
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await pool.end();
    await drop?.();
  });

  function track(t: TestContext, name: string): void {
    t.after(() => pool.query(`DROP TABLE IF EXISTS \`${name}\``));
  }

  it('migrate() is idempotent and answers the statements it ran', async (t) => {
    const name = testTable('migrate');
    track(t, name);
    const first = await migrate({ url: endpoints.mysqlUrl, table: name });
    assert.deepEqual(first, {
      table: name,
      statements: schemaStatements(name),
      applied: schemaStatements(name),
    });
    // Run again beside a transaction that wrote to the table (a worker's): it finds the table and runs nothing.
    const writer = testPool(1);
    t.after(() => writer.end());
    const connection = await writer.getConnection();
    await connection.query('BEGIN');
    await connection.query(
      `INSERT INTO \`${name}\` (namespace, id, state, expires_at, forget_at, token) VALUES ('w', 'w', 'confirmed', 0, 0, 0)`,
    );
    const second = await migrate({ url: endpoints.mysqlUrl, table: name });
    assert.deepEqual(second, { ...first, applied: [] });
    await connection.query('ROLLBACK');
    connection.release();
    const repository = await MySqlRepository.open({ url: endpoints.mysqlUrl, table: name });
    t.after(() => repository.close());
    assert.equal((await repository.add('a', { ttlMs: MINUTE })).added, true);
  });

  it('a missing table is a ConfigError naming it and the command that creates it; createTable opts in', async (t) => {
    const name = testTable('missing');
    track(t, name);
    const user = decodeURIComponent(new URL(endpoints.mysqlUrl).username);
    const password = decodeURIComponent(new URL(endpoints.mysqlUrl).password);
    let hint = '';
    await assert.rejects(MySqlRepository.open({ url: endpoints.mysqlUrl, table: name }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.key, 'repository.table');
      assert.match(error.message, new RegExp(`table \`${name}\` does not exist`));
      // The user kept, the password a slot to fill in: pasted with it filled in, the command creates the table.
      assert.match(
        error.message,
        new RegExp(
          `idem migrate --store 'mysql://${user}:<password>@127\\.0\\.0\\.1:\\d+/\\w+' --table ${name} --apply`,
        ),
      );
      assert.match(error.message, /with the password filled in/);
      assert.ok(!error.message.includes(`:${password}@`), 'the message quotes the password');
      hint = error.message;
      return true;
    });
    const pasted = await runCli(
      pastedCommand(hint).map((word) => word.replace('<password>', encodeURIComponent(password))),
    );
    assert.equal(pasted.code, 0, pasted.stderr);
    const opened = await MySqlRepository.open({ url: endpoints.mysqlUrl, table: name });
    await opened.close();
    await pool.query(`DROP TABLE \`${name}\``);
    const created = await MySqlRepository.open({ url: endpoints.mysqlUrl, table: name, createTable: true });
    t.after(() => created.close());
    assert.equal((await created.add('a', { ttlMs: MINUTE })).added, true);
  });

  it('a table of an older version (no first_seen_at): open() says to migrate, createTable adds the column', async (t) => {
    const name = testTable('older');
    track(t, name);
    await migrate({ url: endpoints.mysqlUrl, table: name });
    // The table as 0.1.0 made it, with one of its rows.
    await pool.query(`ALTER TABLE \`${name}\` DROP COLUMN first_seen_at`);
    await pool.query(
      `INSERT INTO \`${name}\` (namespace, id, state, expires_at, forget_at, token) VALUES ('default', 'old', 'confirmed', ?, ?, 0)`,
      [Date.now() + MINUTE, Date.now() + MINUTE],
    );
    await assert.rejects(MySqlRepository.open({ url: endpoints.mysqlUrl, table: name }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.match(error.message, /predates column first_seen_at; add it with `idem migrate --store /);
      return true;
    });
    const repository = await MySqlRepository.open({
      url: endpoints.mysqlUrl,
      table: name,
      createTable: true,
    });
    t.after(() => repository.close());
    const old = await repository.get('old');
    assert.equal(old?.state, 'confirmed');
    assert.equal(old?.firstSeenAt, undefined, "an older version's row has no first-seen time");
    const added = await repository.add('new', { ttlMs: MINUTE, now: 1_700_000_000_000 });
    assert.equal(added.added && added.record.firstSeenAt, 1_700_000_000_000);
    const again = await migrate({ url: endpoints.mysqlUrl, table: name });
    assert.deepEqual(again.applied, [], 'the column is there: nothing runs');
  });

  it('a same-named table of another layout is refused', async (t) => {
    const name = testTable('layout');
    track(t, name);
    await pool.query(`CREATE TABLE \`${name}\` (id VARCHAR(64) PRIMARY KEY)`);
    await assert.rejects(
      MySqlRepository.open({ url: endpoints.mysqlUrl, table: name }),
      /does not have the expected layout: column namespace should be varbinary \(missing\)/,
    );
  });

  it('a table dropped under a running repository is named in a non-retryable error', async (t) => {
    const name = testTable('dropped');
    await migrate({ url: endpoints.mysqlUrl, table: name });
    const repository = await MySqlRepository.open({ url: endpoints.mysqlUrl, table: name });
    t.after(() => repository.close());
    await pool.query(`DROP TABLE \`${name}\``);
    await assert.rejects(repository.add('a', { ttlMs: MINUTE }), (error: unknown) => {
      assert.ok(error instanceof RepositoryError);
      assert.equal(error.retryable, false);
      assert.match(error.message, /does not exist.*idem migrate/);
      return true;
    });
  });

  it("the URL's password never appears in an error", async () => {
    const failures = await Promise.allSettled([
      MySqlRepository.open({ url: withPassword(SECRET), table }),
      migrate({ url: withPassword(SECRET), table }),
      // Nothing listens there: a connection error, which names the address.
      MySqlRepository.open({
        url: `mysql://idem:${SECRET}@127.0.0.1:1/idem`,
        table,
        connectTimeoutMs: 1_000,
      }),
      // Config validation quotes the value it refuses: redacted.
      MySqlRepository.open({ url: `redis://idem:${SECRET}@127.0.0.1/idem` }),
    ]);
    for (const failure of failures) {
      assert.equal(failure.status, 'rejected');
      const text = messages((failure as PromiseRejectedResult).reason);
      assert.ok(!text.includes(SECRET), `the password leaked: ${text.split('\n')[0]}`);
    }
    const [badLogin, , refused] = failures.map((f) => (f as PromiseRejectedResult).reason);
    assert.ok(badLogin instanceof ConfigError);
    assert.equal(badLogin.key, 'repository.password');
    // The server's own words, which the redaction keeps: a password was sent, and it was wrong.
    assert.match(badLogin.message, /Access denied .*\(using password: YES\)$/);
    assert.ok(refused instanceof RepositoryError && refused.retryable, String(refused));
    assert.match(String(refused.message), /127\.0\.0\.1:1\/idem/);
  });

  it('a malformed %-escape in the URL, or a timeout above 2^31 - 1 ms, is a ConfigError naming the key', async () => {
    const escapes: Array<[string, RegExp]> = [
      [withPassword('50%off'), /password/],
      [endpoints.mysqlUrl.replace(/\/[^/]*$/, '/db%zz'), /path/],
    ];
    for (const [url, part] of escapes) {
      await assert.rejects(MySqlRepository.open({ url, table }), (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, 'repository.url');
        assert.match(error.message, /malformed %-escape/);
        assert.match(error.message, part);
        assert.ok(!error.message.includes('50%off'), 'the password was quoted');
        return true;
      });
    }
    for (const key of ['lockTimeoutMs', 'connectTimeoutMs', 'purgeIntervalMs']) {
      await assert.rejects(
        MySqlRepository.open({ url: endpoints.mysqlUrl, table, [key]: 2 ** 31 }),
        (error: unknown) => error instanceof ConfigError && error.key === `repository.${key}`,
        key,
      );
    }
  });

  it('a URL without password: a ConfigError on repository.password saying where one goes (exit 2)', async () => {
    const bare = withPassword('');
    const where = /repository\.password: .*asks for a password.*the URL.*repository\.password/;
    // Started one at a time: a second call made before the first is awaited could reject with no handler yet.
    for (const attempt of [
      () => MySqlRepository.open({ url: bare, table }),
      () => migrate({ url: bare, table }),
    ]) {
      const error = await attempt().then(
        () => assert.fail('opened without a password'),
        (e: unknown) => e,
      );
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.key, 'repository.password');
      assert.equal(error.retryable, false);
      assert.match(error.message, where);
    }
    const refused = await runCli(['migrate', '--store', bare, '--table', table, '--apply']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, where);
  });

  it('a password given on its own wins over the URL', async (t) => {
    const real = decodeURIComponent(new URL(endpoints.mysqlUrl).password);
    const repository = await MySqlRepository.open({ url: withPassword(SECRET), password: real, table });
    t.after(() => repository.close());
    assert.equal(await repository.contains('x'), false);
  });

  it('TLS with the stack CA verifies the server; another CA is a ConfigError on repository.tls', async (t) => {
    const caFile = process.env.MYSQL_TLS_CA;
    assert.ok(caFile, 'MYSQL_TLS_CA is not set (scripts/test.sh sets it to the stack CA)');
    const ca = readFileSync(caFile, 'utf8');
    const repository = await MySqlRepository.open({ url: endpoints.mysqlUrl, table, tls: { ca } });
    t.after(() => repository.close());
    const [rows] = await repository.pool.query("SHOW SESSION STATUS LIKE 'Ssl_version'");
    assert.match(String((rows as { Value: string }[])[0]?.Value), /^TLSv1\.[23]$/);
    // The system CAs do not know the stack's CA: verification fails, and says where to fix it.
    await assert.rejects(
      MySqlRepository.open({ url: endpoints.mysqlUrl, table, tls: true }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, 'repository.tls');
        return true;
      },
    );
  });

  it('repository.type = "mysql" selects the store and validates its options', async (t) => {
    const resolved = await resolveRepository({
      repository: { type: 'mysql', url: endpoints.mysqlUrl, table, namespace: 'config', poolSize: 2 },
    } as never);
    assert.equal(resolved.type, 'mysql');
    const repository = await resolved.module.create(resolved.options);
    t.after(() => repository.close());
    assert.equal((await repository.add(randomUUID(), { ttlMs: MINUTE })).added, true);
    await assert.rejects(
      resolveRepository({ repository: { type: 'mysql', url: endpoints.mysqlUrl, poolSize: 0 } } as never),
      /repository\.poolSize/,
    );
  });

  it('a claim of new ids is one statement; one that meets a live row adds one read-back', async (t) => {
    // One connection: its session counters are this repository's statements (the status query is not one).
    const single = testPool(1);
    t.after(() => single.end());
    const repository = await MySqlRepository.open({ pool: single, table, namespace: randomUUID() });
    t.after(() => repository.close());
    const executed = async () => {
      const [rows] = await single.query("SHOW SESSION STATUS LIKE 'Com_stmt_execute'");
      return Number((rows as { Value: string }[])[0]?.Value);
    };
    const claim = { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'o' };
    const ids = Array.from({ length: 37 }, () => randomUUID());
    const counts: number[] = [];
    for (const step of [
      () => repository.add(ids[0] as string, claim),
      () =>
        repository.addMany(
          ids.slice(1).map((id) => ({ id })),
          claim,
        ),
      () => repository.markMany([{ id: randomUUID() }, { id: randomUUID() }], { ttlMs: MINUTE }),
      () => repository.addMany([{ id: ids[5] as string }, { id: randomUUID() }], claim),
    ]) {
      const before = await executed();
      await step();
      counts.push((await executed()) - before);
    }
    assert.deepEqual(counts, [1, 1, 1, 2]);
  });

  it('ids compare byte for byte: case, trailing spaces and NUL make different ids', async (t) => {
    const repository = await MySqlRepository.open({
      url: endpoints.mysqlUrl,
      table,
      namespace: randomUUID(),
    });
    t.after(() => repository.close());
    const ids = ['x', 'X', 'x ', ' x', 'x\u0000', 'é', 'e\u0301'];
    const answers = await repository.addMany(
      ids.map((id) => ({ id })),
      { ttlMs: MINUTE },
    );
    assert.deepEqual(
      answers.map((a) => a.added),
      ids.map(() => true),
    );
    const records = await repository.getMany(ids);
    assert.deepEqual(
      records.map((r) => r?.id),
      ids,
    );
  });
});
