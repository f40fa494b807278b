import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { claimedNotOnce, runRace } from '../helpers/race.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

describe('cassandra cross-process race', { skip: skipUnlessEnabled('cassandra') }, () => {
  it('4 processes claiming the same 10,000 ids in batches: each id is claimed exactly once', async (t) => {
    const options = {
      contactPoints: [...endpoints.cassandraContactPoints],
      keyspace: 'idem_test',
      table: 'race_ids',
      namespace: `race-${randomUUID().slice(0, 8)}`,
    };
    // The parent creates the schema once; the workers only check it (concurrent DDL is best avoided).
    const parent = await CassandraRepository.connect({ ...options, createSchema: true });
    t.after(async () => {
      await parent.clear();
      await parent.close();
    });
    const ids = Array.from({ length: 10_000 }, (_, i) => `order-${i}`);

    const result = await runRace({
      store: 'cassandra',
      options,
      ids,
      workers: 4,
      batchSize: 1000,
      mode: 'eager',
      confirm: true,
      // Every id is an LWT in each of the four processes, plus a read and an LWT per confirm: 50,000 Paxos
      // rounds on one shared 2-core node.
      timeoutMs: 600_000,
    });

    assert.deepEqual(claimedNotOnce(result), [], 'ids claimed by no worker or by several');
    assert.equal(
      result.workers.reduce((n, w) => n + w.won.length, 0),
      ids.length,
    );
    for (const worker of result.workers) assert.deepEqual(worker.unconfirmed, [], worker.owner);
    const records = await parent.getMany(ids);
    assert.ok(
      records.every((r) => r?.state === 'confirmed'),
      'every id ends as its winner’s confirmed record',
    );
  });
});
