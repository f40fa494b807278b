import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Client, errors, types } from 'cassandra-driver';
import { RepositoryError } from '../../src/errors.js';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/**
 * A Paxos round the server times out on (`WriteTimeout`, writeType CAS) may or may not have been applied. These
 * tests inject such timeouts around real LWTs on the real node, both after the write landed and before it ran,
 * and check the repository reads back the true outcome instead of guessing.
 */

const contactPoints = [...endpoints.cassandraContactPoints];
const LONG = { ttlMs: 60_000, leaseMs: 60_000 };

/** The error Cassandra sends when a Paxos round times out. */
function paxosTimeout(): Error {
  const error = new errors.ResponseError(
    types.responseErrorCodes.writeTimeout,
    'Server timeout during write query at consistency LOCAL_SERIAL (0 peer(s) acknowledged the write over 1 required)',
  );
  return Object.assign(error, { writeType: 'CAS', consistencies: types.consistencies.localSerial });
}

type Fault = 'after' | 'before';

describe('cassandra LWT with unknown outcome', { skip: skipUnlessEnabled('cassandra') }, () => {
  let client: Client;
  /** Faults for the next LWTs, in order: `after` runs the statement then throws, `before` throws instead. */
  const faults: Fault[] = [];
  let faulty: Client;

  before(async () => {
    client = new Client({ contactPoints, localDataCenter: 'datacenter1' });
    await client.connect();
    faulty = new Proxy(client, {
      get(target, property) {
        if (property === 'execute') {
          return async (query: string, params: unknown[], options: object) => {
            const fault = / IF /.test(query) ? faults.shift() : undefined;
            if (fault === 'before') throw paxosTimeout();
            const result = await target.execute(query, params, options);
            if (fault === 'after') throw paxosTimeout();
            return result;
          };
        }
        const value = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  });
  after(async () => {
    await client.shutdown();
  });

  const open = async () => {
    faults.length = 0;
    return CassandraRepository.connect({
      client: faulty,
      keyspace: 'idem_test',
      table: 'contract_ids',
      createSchema: true,
      namespace: `lwt-${randomUUID().slice(0, 8)}`,
    });
  };

  it('a claim that landed before its timeout is reported as won', async () => {
    const repo = await open();
    faults.push('after');
    const claim = await repo.add('a', { ...LONG, owner: 'me' });
    assert.equal(claim.added, true);
    assert.equal((await repo.get('a'))?.owner, 'me');
    await repo.close();
  });

  it('a claim that timed out before running still loses to a live claim', async () => {
    const repo = await open();
    await repo.add('b', { ...LONG, owner: 'first' });
    faults.push('before');
    const claim = await repo.add('b', { ...LONG, owner: 'second' });
    assert.equal(claim.added, false);
    assert.equal(!claim.added && claim.existing.owner, 'first');
    await repo.close();
  });

  it('confirm and owned remove that landed before their timeouts return true', async () => {
    const repo = await open();
    await repo.add('c', { ...LONG, owner: 'me' });
    faults.push('after');
    assert.equal(await repo.confirm({ id: 'c', owner: 'me' }, { ttlMs: 60_000 }), true);
    assert.equal((await repo.get('c'))?.state, 'confirmed');

    await repo.add('d', { ...LONG, owner: 'me' });
    faults.push('after');
    assert.equal(await repo.remove('d', 'me'), true);
    assert.equal(await repo.contains('d'), false);
    await repo.close();
  });

  it('gives up with a retryable RepositoryError when every round times out', async () => {
    const repo = await open();
    faults.push(...Array<Fault>(20).fill('before'));
    await assert.rejects(repo.add('e', { ...LONG, owner: 'me' }), (error: unknown) => {
      assert.ok(error instanceof RepositoryError, String(error));
      assert.equal(error.retryable, true);
      return true;
    });
    await repo.close();
  });
});
