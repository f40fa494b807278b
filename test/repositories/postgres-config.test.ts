/**
 * Opening the PostgreSQL store: options (code and config), a borrowed pool, TLS against the stack's server
 * (its certificate is signed by the stack's CA, POSTGRES_TLS_CA), and errors that name the setting to fix and
 * never print a password.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { inspect } from 'node:util';
import { openRepository } from '../../src/config/repository.js';
import { ConfigError, RepositoryError } from '../../src/errors.js';
import { PostgresRepository } from '../../src/repositories/postgres/index.js';
import { createTestTable, testPool, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const url = endpoints.postgresUrl;
const caPath = resolve(process.env.POSTGRES_TLS_CA ?? '.stack/tls/ca.pem');
const SECRET = 'pw-that-must-not-print-7c1e';

/** The URL with another password. */
function withPassword(password: string, base = url): string {
  const u = new URL(base);
  u.password = password;
  return u.href;
}

/** Everything an error shows when logged: message, stack, causes, own properties. */
function shown(error: unknown): string {
  return `${String(error)}\n${inspect(error, { depth: 6 })}`;
}

describe('postgres options, TLS and errors', { skip: skipUnlessEnabled('postgres') }, () => {
  const table = testTable('config');
  let drop: (() => Promise<void>) | undefined;
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await drop?.();
  });

  it('validates options, naming the key', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ url: 'mysql://h/db', table }, 'repository.url'],
      [{ table }, 'repository.url'],
      [{ url, table: 'x"; DROP TABLE t; --' }, 'repository.table'],
      [{ url, table, namespace: '' }, 'repository.namespace'],
      [{ url, table, lockTimeoutMs: 0 }, 'repository.lockTimeoutMs'],
      [{ url, table, purgeIntervalMs: -1 }, 'repository.purgeIntervalMs'],
      // Above 2^31 - 1 ms: the server refuses lock_timeout and statement_timeout at the first connection (which
      // read as "cannot connect"), and a Node timer fires after 1 ms.
      [{ url, table, lockTimeoutMs: 2 ** 31 }, 'repository.lockTimeoutMs'],
      [{ url, table, statementTimeoutMs: 2 ** 31 }, 'repository.statementTimeoutMs'],
      [{ url, table, connectTimeoutMs: 2 ** 31 }, 'repository.connectTimeoutMs'],
      [{ url, table, purgeIntervalMs: 2 ** 31 }, 'repository.purgeIntervalMs'],
      [{ url, table, keyPrefix: 'x' }, 'repository'],
    ];
    for (const [options, key] of cases) {
      await assert.rejects(
        PostgresRepository.open(options as never),
        (e: unknown) => e instanceof ConfigError && e.key.startsWith(key),
        JSON.stringify(options),
      );
    }
    const pool = testPool(1);
    try {
      await assert.rejects(PostgresRepository.open({ url, table, pool }), /not both/);
    } finally {
      await pool.end();
    }
  });

  it('repository.type = "postgres" in config opens the store', async () => {
    const repository = await openRepository({
      repository: { type: 'postgres', url, table, namespace: 'config-path' },
    });
    try {
      assert.ok(repository instanceof PostgresRepository);
      assert.equal((await repository.add('a', { ttlMs: 60_000 })).added, true);
      await repository.clear();
    } finally {
      await repository.close();
    }
  });

  it('a borrowed pool stays open after close(); the password option replaces the URL password', async () => {
    const pool = testPool(2);
    const borrowed = await PostgresRepository.open({ pool, table, namespace: 'borrowed' });
    assert.equal(borrowed.pool, pool);
    await borrowed.close();
    assert.equal((await pool.query('SELECT 1 AS one')).rows[0].one, 1);
    await pool.end();
    const password = decodeURIComponent(new URL(url).password);
    const split = await PostgresRepository.open({ url: withPassword(SECRET), password, table });
    assert.equal(await split.contains('anything'), false);
    await split.close();
  });

  it('wrong credentials: a ConfigError on repository.password that never shows the password', async () => {
    const error = await PostgresRepository.open({ url: withPassword(SECRET), table }).then(
      () => assert.fail('opened with a wrong password'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.key, 'repository.password');
    assert.ok(!shown(error).includes(SECRET), 'the password is printed');
    const viaOption = await PostgresRepository.open({ url, password: SECRET, table }).catch(
      (e: unknown) => e,
    );
    assert.ok(viaOption instanceof ConfigError);
    assert.ok(!shown(viaOption).includes(SECRET), 'the password option is printed');
  });

  it('an unreachable server: a retryable RepositoryError naming the address, not the password', async () => {
    const u = new URL(withPassword(SECRET));
    u.port = '1';
    const error = await PostgresRepository.open({ url: u.href, table, connectTimeoutMs: 2_000 }).catch(
      (e: unknown) => e,
    );
    assert.ok(error instanceof RepositoryError, String(error));
    assert.equal(error.retryable, true);
    assert.match(error.message, /postgres: cannot connect to postgres:\/\/127\.0\.0\.1:1\/idem/);
    assert.ok(!shown(error).includes(SECRET), 'the password is printed');
  });

  describe('TLS', () => {
    let ca = '';
    before(() => {
      try {
        ca = readFileSync(caPath, 'utf8');
      } catch (error) {
        assert.fail(
          `the test stack's CA is missing at ${caPath} (scripts/stack/up.sh generates it; set POSTGRES_TLS_CA ` +
            `or restart the stack's PostgreSQL): ${String(error)}`,
        );
      }
    });

    it('tls: { ca } connects over TLS and verifies the certificate', async () => {
      const repository = await PostgresRepository.open({ url, table, tls: { ca }, namespace: 'tls' });
      try {
        const { rows } = await repository.pool.query(
          'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
        );
        assert.equal(rows[0].ssl, true, 'the session is not encrypted');
        assert.equal((await repository.add('over-tls', { ttlMs: 60_000 })).added, true);
        await repository.clear();
      } finally {
        await repository.close();
      }
      // Without tls the same server takes plaintext.
      const plain = await PostgresRepository.open({ url, table });
      const { rows } = await plain.pool.query('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()');
      assert.equal(rows[0].ssl, false);
      await plain.close();
    });

    it('tls: true without the CA refuses the certificate: a ConfigError on repository.tls', async () => {
      await assert.rejects(
        PostgresRepository.open({ url, table, tls: true }),
        (e: unknown) =>
          e instanceof ConfigError && e.key === 'repository.tls' && /repository\.tls\.ca/.test(e.message),
      );
    });
  });
});
