/**
 * TLS to MySQL checks the host name a certificate was issued for, not only the CA that signed it: a certificate
 * for another host is refused before the login goes out (mysql2 checks the name only with `verifyIdentity`).
 * Against the stack's MariaDB reached by an address its certificate does not name (a relay on 127.0.0.2), and
 * against an impostor that presents a trusted CA's certificate for another host and counts the logins it gets.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { MySqlRepository } from '../../src/repositories/mysql/index.js';
import { createTestTable, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { LoopbackRelay, MySqlImpostor, makeCertificates } from '../helpers/tls-endpoints.js';

/** The stack URL pointed at another host and port (credentials and database kept). */
function urlAt(host: string, port: number): string {
  const url = new URL(endpoints.mysqlUrl);
  url.hostname = host;
  url.port = String(port);
  return url.href;
}

/** Asserts a ConfigError on repository.tls that says the certificate does not name the host. */
function refusedForHostName(error: unknown): boolean {
  assert.ok(error instanceof ConfigError, String(error));
  assert.equal(error.key, 'repository.tls');
  assert.match(error.message, /altnames|host ?name|not in the cert/i);
  return true;
}

describe('mysql TLS host-name verification', { skip: skipUnlessEnabled('mysql') }, () => {
  const table = testTable('tls');
  let dropTable: () => Promise<void>;
  let stackCa: string;

  before(async () => {
    const caFile = process.env.MYSQL_TLS_CA;
    assert.ok(caFile, 'MYSQL_TLS_CA is not set (scripts/test.sh sets it to the stack CA)');
    stackCa = readFileSync(caFile, 'utf8');
    dropTable = await createTestTable(table);
  });
  after(async () => {
    await dropTable?.();
  });

  it('the stack server reached by an address its certificate does not name is refused', async (t) => {
    const target = new URL(endpoints.mysqlUrl);
    const relay = await LoopbackRelay.start({ host: target.hostname, port: Number(target.port || 3306) });
    t.after(() => relay.close());
    const url = urlAt('127.0.0.2', relay.port);
    // The stack certificate names 127.0.0.1 and localhost; its CA is trusted, so only the name can refuse it.
    await assert.rejects(MySqlRepository.open({ url, table, tls: { ca: stackCa } }), refusedForHostName);
    // Verification off by name still connects (the documented opt-out)...
    const unchecked = await MySqlRepository.open({
      url,
      table,
      tls: { ca: stackCa, rejectUnauthorized: false },
    });
    await unchecked.close();
    // ...and `servername` names the host the certificate must be for, when the address is another.
    const named = await MySqlRepository.open({ url, table, tls: { ca: stackCa, servername: 'localhost' } });
    t.after(() => named.close());
    const [rows] = await named.pool.query("SHOW SESSION STATUS LIKE 'Ssl_version'");
    assert.match(String((rows as { Value: string }[])[0]?.Value), /^TLSv1\.[23]$/);
    await assert.rejects(
      MySqlRepository.open({ url, table, tls: { ca: stackCa, servername: 'db.example.org' } }),
      refusedForHostName,
    );
  });

  it('a trusted CA’s certificate for another host is refused before any login is sent', async (t) => {
    const certificates = makeCertificates(['wrong-host.invalid']);
    const impostor = await MySqlImpostor.start(certificates);
    t.after(() => impostor.close());
    const url = urlAt('127.0.0.1', impostor.port);
    await assert.rejects(
      MySqlRepository.open({ url, table, tls: { ca: certificates.ca } }),
      refusedForHostName,
    );
    assert.ok(impostor.tlsRequests >= 1, 'the client never asked the impostor for TLS');
    assert.equal(impostor.logins, 0, 'the login was sent to a server whose certificate names another host');
  });

  it('a URL ssl parameter that verifies the certificate checks its host name too', async (t) => {
    const certificates = makeCertificates(['wrong-host.invalid']);
    const impostor = await MySqlImpostor.start(certificates);
    t.after(() => impostor.close());
    const url = new URL(urlAt('127.0.0.1', impostor.port));
    url.searchParams.set('ssl', JSON.stringify({ ca: certificates.ca }));
    await assert.rejects(MySqlRepository.open({ url: url.href, table }), refusedForHostName);
    assert.equal(impostor.logins, 0, 'the login was sent to a server whose certificate names another host');
  });

  it('tls.servername must be a host name', async () => {
    await assert.rejects(
      MySqlRepository.open({ url: endpoints.mysqlUrl, table, tls: { servername: '10.1.2.3' } }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, 'repository.tls.servername');
        return true;
      },
    );
  });
});
