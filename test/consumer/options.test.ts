import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import { z } from 'zod';
import { configSections, consumerFromConfig, loadConfig } from '../../src/config/index.js';
import { IdempotentConsumer, type IdempotentConsumerOptions } from '../../src/consumer/index.js';
import { ClaimLostError, ConfigError, ErrorCodes, IdempotencyError } from '../../src/errors.js';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { closeAfter, endpoints, skipUnlessEnabled } from '../helpers/stores.js';

type Msg = { id: string };

/** The ConfigError `new IdempotentConsumer(options)` throws. */
function refused(options: Partial<IdempotentConsumerOptions<Msg>>): ConfigError {
  try {
    new IdempotentConsumer<Msg>({ repository: new MemoryRepository(), id: 'id', ...options });
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    return error;
  }
  return assert.fail('expected a ConfigError');
}

describe('consumer constructor options are checked like config', () => {
  const cases: [string, Partial<IdempotentConsumerOptions<Msg>>, string, string][] = [
    [
      'a misspelt mode',
      { mode: 'eagre' as never },
      'mode',
      'option mode of new IdempotentConsumer(...): must be one of "eager", "lazy", got "eagre"',
    ],
    [
      'a NaN TTL',
      { ttlMs: Number.NaN },
      'ttlMs',
      'option ttlMs of new IdempotentConsumer(...): must be a number of milliseconds, got NaN',
    ],
    [
      'a negative lease',
      { leaseMs: -1 },
      'leaseMs',
      'option leaseMs of new IdempotentConsumer(...): must be greater than 0, got -1',
    ],
    [
      'an infinite TTL',
      { ttlMs: Number.POSITIVE_INFINITY },
      'ttlMs',
      'option ttlMs of new IdempotentConsumer(...): must be a number of milliseconds, got Infinity',
    ],
    [
      'a TTL given as text',
      { ttlMs: '5s' as never },
      'ttlMs',
      'option ttlMs of new IdempotentConsumer(...): must be a number of milliseconds, got "5s"',
    ],
    [
      'an unknown lostClaim policy',
      { lostClaim: 'ignore' as never },
      'lostClaim',
      'option lostClaim of new IdempotentConsumer(...): must be one of "report", "error", got "ignore"',
    ],
    [
      'a bad field path',
      { id: 'a..b' },
      'id',
      'option id of new IdempotentConsumer(...): must be a dotted field path ("a.b") or a function, got "a..b"',
    ],
    [
      'a hook that is not a function',
      { onDuplicate: 'log' as never },
      'onDuplicate',
      'option onDuplicate of new IdempotentConsumer(...): must be a function, got "log"',
    ],
    [
      'a fractional event-time interval',
      { eventTime: { intervalMs: 1.5 } },
      'eventTime.intervalMs',
      'option eventTime.intervalMs of new IdempotentConsumer(...): must be a whole number of milliseconds, got 1.5',
    ],
  ];
  for (const [label, options, key, message] of cases) {
    test(`${label} names the option`, () => {
      const error = refused(options);
      assert.equal(error.key, key);
      assert.equal(error.message, message);
    });
  }

  test('a misspelt option name is refused, listing the valid ones', () => {
    const error = refused({ ttl: 5 } as never);
    assert.equal(error.key, 'ttl');
    assert.match(
      error.message,
      /^option ttl of new IdempotentConsumer\(\.\.\.\): unknown option; valid options: /,
    );
    assert.match(error.message, /\bttlMs\b/);
  });

  test('a missing repository or id is required', () => {
    assert.equal(
      refused({ repository: undefined as never }).message,
      'option repository of new IdempotentConsumer(...): is required',
    );
    assert.throws(
      () => new IdempotentConsumer({ repository: new MemoryRepository() } as never),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message === 'option id of new IdempotentConsumer(...): is required',
    );
  });

  test('lostClaim defaults to report and accepts error', () => {
    const repository = new MemoryRepository();
    assert.equal(new IdempotentConsumer<Msg>({ repository, id: 'id' }).options.lostClaim, 'report');
    assert.equal(
      new IdempotentConsumer<Msg>({ repository, id: 'id', lostClaim: 'error' }).options.lostClaim,
      'error',
    );
  });

  test('[consumer] lostClaim reaches the consumer built from config', async () => {
    const config = await loadConfig(z.object(configSections).strict(), {
      text: '[repository]\ntype = "memory"\n[consumer]\nid = "id"\nlostClaim = "error"\n',
      env: {},
    });
    const consumer = consumerFromConfig<Msg>(config.consumer, new MemoryRepository());
    assert.equal(consumer.options.lostClaim, 'error');
  });

  test('ClaimLostError belongs to the error family, with a code, no retry and its cause', () => {
    const cause = new Error('confirm returned false');
    const error = new ClaimLostError('order-1', { cause });
    assert.ok(error instanceof IdempotencyError);
    assert.equal(error.code, ErrorCodes.claimLost);
    assert.equal(ClaimLostError.code, 'IDEM_ERR_CLAIM_LOST');
    assert.equal(error.retryable, false);
    assert.equal(error.cause, cause);
    assert.equal(error.id, 'order-1');
    assert.match(error.message, /"order-1".*lease ran out/);
  });
});

describe('a TTL or lease the store cannot keep', { skip: skipUnlessEnabled('cassandra') }, () => {
  test('Cassandra (TTL at most 20 years) refuses a longer ttlMs or leaseMs, naming the option', async (t) => {
    const repository = closeAfter(
      t,
      await CassandraRepository.open({
        contactPoints: [...endpoints.cassandraContactPoints],
        keyspace: 'idem_test',
        table: 'contract_ids',
        createSchema: true,
        namespace: `options-${randomUUID().slice(0, 8)}`,
      }),
    );
    assert.equal(repository.capabilities.maxTtlMs, 630_720_000_000);
    const thirtyYears = 30 * 365 * 86_400_000;
    for (const key of ['ttlMs', 'leaseMs'] as const) {
      assert.throws(
        () => new IdempotentConsumer<Msg>({ repository, id: 'id', [key]: thirtyYears }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.key === key &&
          error.message ===
            `option ${key} of new IdempotentConsumer(...): must be at most 630720000000 ms (20 years), the longest the store can keep, got ${thirtyYears}`,
      );
    }
    // Exactly the limit is fine.
    new IdempotentConsumer<Msg>({ repository, id: 'id', ttlMs: 630_720_000_000 });
  });

  test('stores without a limit accept a long TTL', () => {
    const repository = new MemoryRepository();
    assert.equal(repository.capabilities.maxTtlMs, undefined);
    new IdempotentConsumer<Msg>({ repository, id: 'id', ttlMs: 30 * 365 * 86_400_000 });
  });
});
