import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { closeAfter, endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/**
 * Cassandra-specific TTL corners the contract cannot see: an UPDATE's `USING TTL` covers only the cells it sets,
 * while the row marker keeps the TTL of the INSERT that created the row.
 */

const connection = {
  contactPoints: [...endpoints.cassandraContactPoints],
  keyspace: 'idem_test',
  table: 'contract_ids',
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const open = () =>
  CassandraRepository.connect({ ...connection, namespace: `ttl-${randomUUID().slice(0, 8)}` });

describe('cassandra TTL corners', { skip: skipUnlessEnabled('cassandra') }, () => {
  before(async () => {
    await (await CassandraRepository.connect({ ...connection, createSchema: true })).close();
  });

  it('confirm keeps event time and fingerprint beyond the claim’s short lease TTL', async (t) => {
    const repo = closeAfter(t, await open());
    const id = `fp-${randomUUID()}`;
    await repo.add(
      id,
      { ttlMs: 60_000, leaseMs: 1_000, owner: 'me' },
      { eventTime: 42, fingerprint: 'sha256:f' },
    );
    assert.equal(await repo.confirm({ id, owner: 'me' }, { ttlMs: 60_000 }), true);
    // Past the claim's store TTL (1 s): cells written by the claim alone would be gone now.
    await sleep(2_200);
    const record = await repo.get(id);
    assert.equal(record?.state, 'confirmed');
    assert.equal(record?.eventTime, 42);
    assert.equal(record?.fingerprint, 'sha256:f');
  });

  it('a row whose cells expired before its row marker counts as absent and can be claimed', async (t) => {
    const repo = closeAfter(t, await open());
    const id = `marker-${randomUUID()}`;
    // The claim's INSERT gives the row marker a 60 s TTL; the confirm's UPDATE gives every cell 1 s.
    await repo.add(id, { ttlMs: 60_000, leaseMs: 60_000, owner: 'me' });
    assert.equal(await repo.confirm({ id, owner: 'me' }, { ttlMs: 500 }), true);
    await sleep(2_200);
    assert.equal(await repo.get(id), undefined);
    const again = await repo.add(id, { ttlMs: 60_000, leaseMs: 60_000, owner: 'next' });
    assert.equal(again.added, true);
    assert.equal((await repo.get(id))?.owner, 'next');
  });

  it('an expired confirmed record is replaced by a lazy mark without leaking its old fields', async (t) => {
    const repo = closeAfter(t, await open());
    const id = `lazy-${randomUUID()}`;
    await repo.add(id, { ttlMs: 60_000, leaseMs: 60_000, owner: 'old' }, { fingerprint: 'old-fp' });
    const now = Date.now();
    // Judged at a later time the claim has lapsed; the row is still in the table.
    const marked = await repo.add(id, { ttlMs: 60_000, now: now + 120_000 });
    assert.equal(marked.added, true);
    const record = await repo.get(id, { now: now + 120_001 });
    assert.equal(record?.state, 'confirmed');
    assert.equal(record?.owner, undefined);
    assert.equal(record?.leaseExpiresAt, undefined);
    assert.equal(record?.fingerprint, undefined);
  });
});

describe('cassandra: a claim outlived by its handler', { skip: skipUnlessEnabled('cassandra') }, () => {
  before(async () => {
    await (await CassandraRepository.connect({ ...connection, createSchema: true })).close();
  });

  it('is still confirmed by its owner after the lease passed, when nobody took it over', async (t) => {
    const repo = closeAfter(t, await open());
    const id = `outlived-${randomUUID()}`;
    await repo.add(id, { ttlMs: 60_000, leaseMs: 1_000, owner: 'slow' }, { fingerprint: 'fp' });
    // Past the lease, and past a store TTL equal to the lease in whole seconds.
    await sleep(2_200);
    assert.equal(await repo.confirm({ id, owner: 'slow' }, { ttlMs: 60_000 }), true);
    const record = await repo.get(id);
    assert.equal(record?.state, 'confirmed');
    assert.equal(record?.fingerprint, 'fp');
  });

  it('after a takeover, the old owner’s confirm returns false and leaves the new claim intact', async (t) => {
    const repo = closeAfter(t, await open());
    const id = `taken-${randomUUID()}`;
    await repo.add(id, { ttlMs: 60_000, leaseMs: 1_000, owner: 'slow' });
    await sleep(2_200);
    assert.equal((await repo.add(id, { ttlMs: 60_000, leaseMs: 60_000, owner: 'next' })).added, true);
    assert.equal(await repo.confirm({ id, owner: 'slow' }, { ttlMs: 60_000 }), false);
    const record = await repo.get(id);
    assert.equal(record?.state, 'in-flight');
    assert.equal(record?.owner, 'next');
  });

  it('a lapsed claim stays claimable by another owner while its row is still stored', async (t) => {
    const repo = closeAfter(t, await open());
    const id = `lapsed-${randomUUID()}`;
    await repo.add(id, { ttlMs: 60_000, leaseMs: 300, owner: 'crashed' });
    await sleep(400);
    assert.equal(await repo.contains(id), false);
    assert.equal((await repo.add(id, { ttlMs: 60_000, leaseMs: 60_000, owner: 'rescuer' })).added, true);
    assert.equal((await repo.get(id))?.owner, 'rescuer');
  });
});
