import { after, before, describe } from 'node:test';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { repositoryContract } from '../contract/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const connection = {
  contactPoints: [...endpoints.cassandraContactPoints],
  keyspace: 'idem_test',
  table: 'contract_ids',
};

describe('cassandra', { skip: skipUnlessEnabled('cassandra') }, () => {
  // The keyspace and table are created once; each test then works in its own namespace of that table.
  let schema: CassandraRepository | undefined;
  before(async () => {
    schema = await CassandraRepository.connect({ ...connection, createSchema: true, namespace: 'warm-up' });
    // A cold node's first Paxos rounds are slow; the lease tests should not pay for them.
    await schema.addMany(
      Array.from({ length: 50 }, (_, i) => ({ id: `warm-${i}` })),
      { ttlMs: 1_000, leaseMs: 1_000, owner: 'warm-up' },
    );
  });
  after(async () => {
    await schema?.close();
  });

  repositoryContract({
    name: 'cassandra',
    factory: ({ namespace }) => CassandraRepository.connect({ ...connection, namespace }),
    capabilities: {
      persistent: true,
      shared: true,
      maxIdBytes: 1024,
      nativeBatch: false,
      maxTtlMs: 630_720_000_000,
      maxResultBytes: 1_048_576,
    },
  });
});
