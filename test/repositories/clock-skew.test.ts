import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { checkClockSkew, narrowest, offsetOf } from '../../src/repositories/clock-skew.js';

/** The skew judgement shared by DynamoDB and Cassandra; their tests against the real servers are in *-clock.test.ts. */

const check = (maxClockSkewMs: number, warnings: string[] = []) => ({
  store: 'test',
  where: 'here',
  maxClockSkewMs,
  onClockSkew: 'fail' as const,
  warn: (message: string) => void warnings.push(message),
});

describe('clock skew judgement', () => {
  it('bounds the offset by the round trip and the server clock resolution', () => {
    // Local 1000..1100; a Date header of 5000 covers 5000..5999.
    assert.deepEqual(
      offsetOf({ localBefore: 1000, localAfter: 1100, serverEarliest: 5000, serverLatest: 5999 }),
      {
        minMs: 3900,
        maxMs: 4999,
      },
    );
    const wide = { localBefore: 0, localAfter: 500, serverEarliest: 100, serverLatest: 100 };
    const tight = { localBefore: 0, localAfter: 10, serverEarliest: 100, serverLatest: 100 };
    assert.deepEqual(narrowest([wide, tight]), { minMs: 90, maxMs: 100 });
    assert.equal(narrowest([]), undefined);
  });

  it('never refuses on uncertainty alone: only the smallest skew the range allows counts', () => {
    // A coarse 1 s Date header and a slow round trip leave 0 possible: accepted even with a tight bound.
    assert.doesNotThrow(() => checkClockSkew({ minMs: -1500, maxMs: 500 }, check(100)));
    assert.doesNotThrow(() => checkClockSkew({ minMs: 1500, maxMs: 2500 }, check(2_000)));
  });

  it('refuses a skew surely past the bound, saying which way, naming repository.maxClockSkewMs', () => {
    for (const [offset, direction] of [
      [{ minMs: 2500, maxMs: 3500 }, 'behind'],
      [{ minMs: -3500, maxMs: -2500 }, 'ahead of'],
    ] as const) {
      assert.throws(
        () => checkClockSkew(offset, check(2_000)),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.key === 'repository.maxClockSkewMs' &&
          error.message.includes(`at least 2500 ms ${direction} the test server at here`),
      );
    }
  });

  it('warns instead with onClockSkew "warn"', () => {
    const warnings: string[] = [];
    checkClockSkew({ minMs: 2500, maxMs: 3500 }, { ...check(2_000, warnings), onClockSkew: 'warn' });
    assert.equal(warnings.length, 1);
    assert.match(warnings[0] as string, /^test: repository\.maxClockSkewMs: .*at least 2500 ms behind/);
  });
});
