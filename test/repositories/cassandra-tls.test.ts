import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from 'cassandra-driver';
import { z } from 'zod';
import { loadConfig } from '../../src/config/load.js';
import { configSections } from '../../src/config/sections.js';
import { ConfigError } from '../../src/errors.js';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

// The stack's Cassandra has client encryption on with `optional: true` (TLS and plaintext on one port), its
// certificate signed by a CA that scripts/stack/lib.sh generates into .stack/tls/ (CASSANDRA_TLS_CA).
const contactPoints = [...endpoints.cassandraContactPoints];
const caPath = resolve(process.env.CASSANDRA_TLS_CA ?? '.stack/tls/ca.pem');
const skip = skipUnlessEnabled('cassandra');
const KEYSPACE = 'idem_tls_test';

/** Connections the server counts as TLS ones (`system_views.clients`), seen through a plaintext client. */
async function tlsConnections(plain: Client): Promise<number> {
  const rows = await plain.execute('SELECT ssl_enabled FROM system_views.clients');
  return rows.rows.filter((row) => row.ssl_enabled === true).length;
}

describe('cassandra tls', { skip }, () => {
  let ca = '';
  let plain: Client;

  before(async () => {
    try {
      ca = readFileSync(caPath, 'utf8');
    } catch (error) {
      assert.fail(
        `the test stack's CA is missing at ${caPath} (scripts/stack/up.sh generates it; set CASSANDRA_TLS_CA ` +
          `or restart the stack's Cassandra): ${String(error)}`,
      );
    }
    // Plaintext on the same port: client encryption is optional there.
    plain = new Client({ contactPoints, localDataCenter: 'datacenter1' });
    await plain.connect();
    await plain.execute(
      `CREATE KEYSPACE IF NOT EXISTS ${KEYSPACE} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
    );
  });
  after(async () => {
    await plain?.shutdown();
  });

  it('tls: { ca } connects over TLS, verifies the certificate, and the server reports an encrypted session', async () => {
    const before = await tlsConnections(plain);
    const repository = await CassandraRepository.connect({
      contactPoints,
      keyspace: KEYSPACE,
      createSchema: true,
      tls: { ca },
    });
    try {
      const id = `tls-${Date.now()}`;
      await repository.add(id, { ttlMs: 60_000 });
      assert.equal(await repository.contains(id), true);
      const during = await tlsConnections(plain);
      assert.ok(
        during > before,
        `TLS connections on the server: ${before} before, ${during} with the store open`,
      );
    } finally {
      await repository.close();
    }
  });

  it('the certificate is verified by default: tls = true (system CAs) refuses the self-signed CA, naming repository.tls', async () => {
    // The driver alone would accept any certificate (its default is rejectUnauthorized: false).
    const error = await CassandraRepository.connect({ contactPoints, keyspace: KEYSPACE, tls: true }).then(
      () => assert.fail('expected the untrusted certificate to be refused'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.key, 'repository.tls');
    assert.match(
      error.message,
      /^repository\.tls: TLS connection failed \(.*self[- ]signed certificate in certificate chain.*\); set repository\.tls\.ca to the PEM of the CA that signed the server's certificate/,
    );
  });

  it('a servername the certificate does not name is refused', async () => {
    await assert.rejects(
      CassandraRepository.connect({
        contactPoints,
        keyspace: KEYSPACE,
        tls: { ca, servername: 'db.example.com' },
      }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, 'repository.tls');
        assert.match(error.message, /db\.example\.com/);
        return true;
      },
    );
  });

  it('a bad tls table in a config file says what tls takes', async () => {
    const schema = z.object(configSections).strict();
    const config = await loadConfig(schema, {
      path: 'idem.toml',
      text: `[repository]\ntype = "cassandra"\ncontactPoints = ["127.0.0.1:9042"]\ntls = { rejectUnauthorized = "no" }\n`,
      env: {},
    });
    const { resolveRepository } = await import('../../src/config/index.js');
    await assert.rejects(resolveRepository(config), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(
        error.message,
        'idem.toml:4: repository.tls: must be true, false or a table of TLS settings (ca, cert, key, servername, rejectUnauthorized), got {"rejectUnauthorized":"no"}',
      );
      return true;
    });
  });
});
