import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
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
});
