import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { Client } from 'cassandra-driver';
import { ConfigError } from '../../src/errors.js';
import { ttlSeconds } from '../../src/repositories/cassandra/cql.js';
import {
  CassandraRepository,
  cassandraOptionsSchema,
  repositoryModule,
} from '../../src/repositories/cassandra/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const contactPoints = [...endpoints.cassandraContactPoints];

/** Asserts a ConfigError naming `key`. */
const configError = (key: string) => (error: unknown) => {
  assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
  assert.equal(error.key, key);
  return true;
};

describe('cassandra options (no server)', () => {
  it('fills the documented defaults', () => {
    const options = cassandraOptionsSchema.parse({ contactPoints });
    assert.equal(options.localDataCenter, 'datacenter1');
    assert.equal(options.keyspace, 'idempotency');
    assert.equal(options.table, 'processed_ids');
    assert.equal(options.createSchema, false);
    assert.deepEqual(options.consistency, { read: 'LOCAL_QUORUM', write: 'LOCAL_QUORUM' });
    assert.equal(options.serialConsistency, 'LOCAL_SERIAL');
    assert.deepEqual(options.replication, { class: 'SimpleStrategy', replication_factor: 1 });
  });

  it('rejects identifiers that could carry CQL, in the schema and in connect (before any connection)', async () => {
    for (const [key, value] of [
      ['keyspace', `ks"; DROP KEYSPACE x; --`],
      ['keyspace', "it's"],
      ['table', 'a-b'],
      ['table', '1abc'],
      ['table', 'x'.repeat(49)],
    ] as const) {
      const parsed = cassandraOptionsSchema.safeParse({ contactPoints, [key]: value });
      assert.equal(parsed.success, false, `${key}=${value}`);
      assert.deepEqual(parsed.error?.issues[0]?.path, [key]);
      // An unroutable address: the identifier must be rejected before it is ever tried.
      await assert.rejects(
        CassandraRepository.connect({ contactPoints: ['192.0.2.1:9042'], [key]: value }),
        configError(`repository.${key}`),
      );
    }
  });

  it('rejects replication maps that could carry CQL, and half credentials', async () => {
    const bad = { class: 'SimpleStrategy', replication_factor: "1'}; DROP KEYSPACE x; --" };
    assert.equal(cassandraOptionsSchema.safeParse({ contactPoints, replication: bad }).success, false);
    await assert.rejects(
      CassandraRepository.connect({ contactPoints, username: 'cassandra' }),
      configError('repository.password'),
    );
    await assert.rejects(
      CassandraRepository.connect({ contactPoints, consistency: { read: 'ANY' as never } }),
      configError('repository.consistency.read'),
    );
  });

  it('says in plain words what a bad option needs, naming the option and the call', async () => {
    const message = (error: unknown) => (error instanceof ConfigError ? error.message : String(error));
    await assert.rejects(
      CassandraRepository.connect({ contactPoints, keyspace: "it's" }),
      (error: unknown) => {
        assert.equal(
          message(error),
          'option keyspace of CassandraRepository.connect(...): must be 1-48 letters, digits or "_", starting with a letter (a CQL name), got "it\'s"',
        );
        return true;
      },
    );
    await assert.rejects(
      CassandraRepository.connect({ contactPoints, batchConcurrency: 0 }),
      (error: unknown) => {
        assert.equal(
          message(error),
          'option batchConcurrency of CassandraRepository.connect(...): must be at least 1, got 0',
        );
        return true;
      },
    );
    await assert.rejects(
      CassandraRepository.connect({ contactPoints, username: 'u', password: 5 as never }),
      (error: unknown) => {
        assert.equal(
          message(error),
          'option password of CassandraRepository.connect(...): must be a string, got [redacted]',
        );
        return true;
      },
    );
  });

  it('store-side TTLs are whole seconds rounded up, at least one', () => {
    assert.equal(ttlSeconds(10_000, 10_000), 1);
    assert.equal(ttlSeconds(10_001, 10_000), 1);
    assert.equal(ttlSeconds(11_000, 10_000), 1);
    assert.equal(ttlSeconds(11_001, 10_000), 2);
    assert.equal(ttlSeconds(5_000, 10_000), 1);
  });
});

describe('cassandra bad config (server)', { skip: skipUnlessEnabled('cassandra') }, () => {
  // The keyspace must exist for the missing-table case to be about the table (a fresh node has none).
  before(async () => {
    const repo = await CassandraRepository.connect({
      contactPoints,
      keyspace: 'idem_test',
      table: 'contract_ids',
      createSchema: true,
    });
    await repo.close();
  });

  it('an unreachable host names repository.contactPoints, promptly', async () => {
    // Port 1 on loopback refuses at once; the connect timeout bounds unroutable addresses.
    await assert.rejects(
      repositoryModule.create(cassandraOptionsSchema.parse({ contactPoints: ['127.0.0.1:1'] })),
      configError('repository.contactPoints'),
    );
    await assert.rejects(
      CassandraRepository.connect({ contactPoints: ['192.0.2.1:9042'], connectTimeoutMs: 300 }),
      configError('repository.contactPoints'),
    );
  });

  it('a missing table or keyspace with createSchema off names the key to fix', async () => {
    await assert.rejects(
      CassandraRepository.connect({ contactPoints, keyspace: 'idem_test', table: `missing_${Date.now()}` }),
      configError('repository.table'),
    );
    await assert.rejects(
      CassandraRepository.connect({ contactPoints, keyspace: `missing_${Date.now()}` }),
      configError('repository.keyspace'),
    );
  });

  it('a same-named table of another shape names repository.table', async () => {
    const client = new Client({ contactPoints, localDataCenter: 'datacenter1' });
    try {
      await client.connect();
      await client.execute(
        'CREATE TABLE IF NOT EXISTS idem_test.other_shape (ns text, id text, state text, PRIMARY KEY ((ns, id)))',
      );
    } finally {
      await client.shutdown();
    }
    await assert.rejects(
      CassandraRepository.connect({
        contactPoints,
        keyspace: 'idem_test',
        table: 'other_shape',
        createSchema: true,
      }),
      (error: unknown) => configError('repository.table')(error) && /expected layout/.test(String(error)),
    );
  });

  it('a table of an older version (no first_seen_at): createSchema adds the column, without it the error says how', async () => {
    const table = `older_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
    const options = { contactPoints, keyspace: 'idem_test', table };
    const created = await CassandraRepository.connect({ ...options, createSchema: true });
    await created.add('old', { ttlMs: 600_000 });
    await created.close();
    const client = new Client({ contactPoints, localDataCenter: 'datacenter1' });
    try {
      await client.connect();
      // The table as 0.1.0 made it: its rows keep no first-seen time.
      await client.execute(`ALTER TABLE idem_test.${table} DROP first_seen_at`);
      await assert.rejects(
        CassandraRepository.connect(options),
        (error: unknown) =>
          configError('repository.table')(error) &&
          /predates column first_seen_at: run `ALTER TABLE "idem_test"."older_\w+" ADD first_seen_at bigint`/.test(
            String(error),
          ),
      );
      const upgraded = await CassandraRepository.connect({ ...options, createSchema: true });
      try {
        const old = await upgraded.get('old');
        assert.equal(old?.state, 'confirmed');
        assert.equal(old?.firstSeenAt, undefined, "an older version's row has no first-seen time");
        const added = await upgraded.add('new', { ttlMs: 600_000, now: Date.now() - 1_000 });
        assert.ok(added.added && added.record.firstSeenAt !== undefined);
        assert.equal((await upgraded.get('new'))?.firstSeenAt, added.added ? added.record.firstSeenAt : -1);
      } finally {
        await upgraded.close();
      }
    } finally {
      await client.execute(`DROP TABLE IF EXISTS idem_test.${table}`).catch(() => undefined);
      await client.shutdown();
    }
  });

  it('a wrong local datacenter names repository.localDataCenter', async () => {
    await assert.rejects(
      CassandraRepository.connect({ contactPoints, localDataCenter: 'no-such-dc' }),
      configError('repository.localDataCenter'),
    );
  });

  it('uses an existing client as is and leaves it open on close()', async () => {
    const client = new Client({ contactPoints, localDataCenter: 'datacenter1' });
    try {
      const repo = await CassandraRepository.connect({
        client,
        keyspace: 'idem_test',
        table: 'contract_ids',
        createSchema: true,
        namespace: `client-${randomUUID().slice(0, 8)}`,
      });
      assert.equal((await repo.add('x', { ttlMs: 60_000 })).added, true);
      await repo.close();
      const rows = await client.execute('SELECT release_version FROM system.local');
      assert.equal(rows.rowLength, 1);
    } finally {
      await client.shutdown();
    }
  });
});
