import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ConfigError } from '../../src/errors.js';
import { DynamoDbRepository, dynamodbOptionsSchema } from '../../src/repositories/dynamodb/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

/**
 * Leases and retention are judged by each worker's clock, so `open` measures the skew to the endpoint (its HTTP
 * `Date` header, whole seconds) and refuses (or warns) past `maxClockSkewMs`. A skewed clock is injected through
 * the repository's `clock` option; dynalite runs on this machine's clock.
 */

const connection = {
  endpoint: endpoints.dynamodbEndpoint,
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
};
const table = `idem-clock-${randomUUID().slice(0, 8)}`;
const skewed = (offsetMs: number) => () => Date.now() + offsetMs;
const collect = () => {
  const warnings: string[] = [];
  return { warnings, logger: { warn: (message: string) => void warnings.push(message) } };
};

describe('dynamodb clock skew against dynalite', { skip: skipUnlessEnabled('dynamodb') }, () => {
  before(async () => {
    const repo = await DynamoDbRepository.open({
      ...connection,
      table,
      createTable: true,
      logger: collect().logger,
    });
    await repo.close();
  });

  after(async () => {
    const client = new DynamoDBClient({ region: 'us-east-1', ...connection });
    await client.send(new DeleteTableCommand({ TableName: table })).catch(() => {});
    client.destroy();
  });

  it('defaults to refusing a skew beyond 2 s', () => {
    const options = dynamodbOptionsSchema.parse({ table });
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
        DynamoDbRepository.open({ ...connection, table, clock: skewed(offset), logger }).then((repo) =>
          repo.close(),
        ),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
          assert.equal(error.key, 'repository.maxClockSkewMs');
          assert.match(
            error.message,
            new RegExp(`clock is at least \\d+ ms ${direction} the dynamodb server`),
          );
          return true;
        },
      );
      assert.deepEqual(warnings, []);
    });
  }

  it('with onClockSkew "warn", opens and warns once, naming the option', async () => {
    const { warnings, logger } = collect();
    const repo = await DynamoDbRepository.open({
      ...connection,
      table,
      keyPrefix: 'warn:',
      clock: skewed(61_000),
      onClockSkew: 'warn',
      logger,
    });
    try {
      assert.equal(warnings.length, 1);
      assert.match(warnings[0] as string, /maxClockSkewMs.*ahead of the dynamodb server/);
      assert.equal((await repo.add('x', { ttlMs: 60_000 })).added, true);
    } finally {
      await repo.close();
    }
  });

  it('accepts a skew within a raised bound, and an agreeing clock, without a word', async () => {
    const { warnings, logger } = collect();
    for (const extra of [{ clock: skewed(61_000), maxClockSkewMs: 120_000 }, {}]) {
      const repo = await DynamoDbRepository.open({ ...connection, table, logger, ...extra });
      await repo.close();
    }
    assert.deepEqual(warnings, []);
  });
});
