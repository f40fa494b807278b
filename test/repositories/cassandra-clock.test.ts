import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { Client, policies } from 'cassandra-driver';
import { ConfigError } from '../../src/errors.js';
import { CassandraRepository, cassandraOptionsSchema } from '../../src/repositories/cassandra/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/**
 * Leases and retention are judged by each worker's clock, so `connect` measures the skew to the server and refuses
 * (or warns) past `maxClockSkewMs`. A skewed clock is injected through the repository's `clock` option.
 */

const connection = {
  contactPoints: [...endpoints.cassandraContactPoints],
  keyspace: 'idem_test',
  table: 'contract_ids',
};
const skewed = (offsetMs: number) => () => Date.now() + offsetMs;
const collect = () => {
  const warnings: string[] = [];
  return { warnings, logger: { warn: (message: string) => void warnings.push(message) } };
};

describe('cassandra clock skew', { skip: skipUnlessEnabled('cassandra') }, () => {
  before(async () => {
    await (await CassandraRepository.connect({ ...connection, createSchema: true })).close();
  });

  it('defaults to refusing a skew beyond 2 s', () => {
    const options = cassandraOptionsSchema.parse({});
    assert.equal(options.maxClockSkewMs, 2_000);
    assert.equal(options.onClockSkew, 'fail');
  });

  for (const [offset, direction] of [
    [61_000, 'ahead of'],
    [-61_000, 'behind'],
  ] as const) {
    it(`refuses a worker whose clock is ${direction} the server by 61 s, naming repository.maxClockSkewMs`, async () => {
      const { warnings, logger } = collect();
      await assert.rejects(
        // A repository that opens anyway is closed, so a failing run still ends.
        CassandraRepository.connect({ ...connection, namespace: 'skew', clock: skewed(offset), logger }).then(
          (repo) => repo.close(),
        ),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
          assert.equal(error.key, 'repository.maxClockSkewMs');
          assert.match(
            error.message,
            new RegExp(`clock is at least \\d+ ms ${direction} the cassandra server`),
          );
          return true;
        },
      );
      assert.deepEqual(warnings, []);
    });
  }

  it('with onClockSkew "warn", opens and warns once, naming the option', async () => {
    const { warnings, logger } = collect();
    const repo = await CassandraRepository.connect({
      ...connection,
      namespace: `skew-${randomUUID().slice(0, 8)}`,
      clock: skewed(61_000),
      onClockSkew: 'warn',
      logger,
    });
    try {
      assert.equal(warnings.length, 1);
      assert.match(warnings[0] as string, /maxClockSkewMs.*ahead of the cassandra server/);
      assert.equal((await repo.add('x', { ttlMs: 60_000 })).added, true);
    } finally {
      await repo.close();
    }
  });

  it('accepts a skew within a raised bound, and an agreeing clock, without a word', async () => {
    const { warnings, logger } = collect();
    const namespace = `skew-${randomUUID().slice(0, 8)}`;
    for (const extra of [{ clock: skewed(61_000), maxClockSkewMs: 120_000 }, {}]) {
      const repo = await CassandraRepository.connect({ ...connection, namespace, logger, ...extra });
      await repo.close();
    }
    assert.deepEqual(warnings, []);
  });

  /**
   * Plain writes (a lazy mark, an unowned remove) and claims (LWTs, stamped with their Paxos ballot by the
   * coordinator) meet on one row. Were plain writes stamped by the worker's clock, a remove's tombstone or an
   * expired mark could outrank the claim that follows it: the claim reports added yet is unseen, and a second
   * worker's claim is added too. The worker's clock here also stamps the driver's writes, as a real host's does.
   */
  const workerAt = async (offsetMs: number) => {
    class Stamps extends policies.timestampGeneration.MonotonicTimestampGenerator {
      override getDate() {
        return Date.now() + offsetMs;
      }
    }
    const client = new Client({
      contactPoints: connection.contactPoints,
      localDataCenter: 'datacenter1',
      policies: { timestampGeneration: new Stamps(1_000, 1_000) },
    });
    const namespace = `order-${randomUUID().slice(0, 8)}`;
    const repo = await CassandraRepository.connect({
      ...connection,
      client,
      namespace,
      clock: skewed(offsetMs),
    });
    return { repo, close: () => repo.close().finally(() => client.shutdown()) };
  };
  const claim = (owner: string) => ({ ttlMs: 60_000, leaseMs: 60_000, owner });

  for (const offset of [0, 1_500, -1_500]) {
    it(`with a worker clock ${offset} ms off the server, a claim after a remove or a lapsed mark holds, and a remove after a claim removes it`, async () => {
      const { repo, close } = await workerAt(offset);
      try {
        // Rounds, because at the same clock the order only broke when both writes fell in one millisecond.
        for (let round = 0; round < 20; round++) {
          const removed = `removed-${round}`;
          await repo.add(removed, { ttlMs: 60_000 });
          assert.equal(await repo.remove(removed), true);
          assert.equal((await repo.add(removed, claim('a'))).added, true);
          assert.equal(
            (await repo.get(removed))?.owner,
            'a',
            `round ${round}: the claim after a remove is seen`,
          );
          assert.equal((await repo.add(removed, claim('b'))).added, false, `round ${round}: and holds`);

          const lapsed = `lapsed-${round}`;
          await repo.add(lapsed, { ttlMs: 1_000, now: Date.now() + offset - 5_000 });
          assert.equal((await repo.add(lapsed, claim('a'))).added, true);
          assert.equal(
            (await repo.get(lapsed))?.owner,
            'a',
            `round ${round}: the claim after a lapsed mark is seen`,
          );

          const claimed = `claimed-${round}`;
          assert.equal((await repo.add(claimed, claim('a'))).added, true);
          assert.equal(await repo.remove(claimed), true);
          assert.equal(
            await repo.get(claimed),
            undefined,
            `round ${round}: a remove after a claim removes it`,
          );
        }
      } finally {
        await close();
      }
    });
  }
});
