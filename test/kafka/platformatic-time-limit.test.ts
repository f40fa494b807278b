/**
 * The step limit of the @platformatic/kafka port's read loop (src/kafka/platformatic/time-limit.ts): a step that
 * never answers fails after its limit, with a warning naming it, as an error the port retries.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { platformaticErrors as errors } from '../../src/kafka/platformatic/errors.js';
import { StepTimeoutError, stepLimitMs, timeLimited } from '../../src/kafka/platformatic/time-limit.js';

/** A warn function that keeps what it was told. */
function recorder() {
  const warnings: { message: string; fields: Record<string, unknown> }[] = [];
  return {
    warnings,
    warn: (message: string, fields: Record<string, unknown>) => warnings.push({ message, fields }),
  };
}

describe('platformatic step time limit', () => {
  it('is twice the request timeout, at least 60 s', () => {
    assert.equal(stepLimitMs(30_000), 60_000);
    assert.equal(stepLimitMs(5_000), 60_000);
    assert.equal(stepLimitMs(45_000), 90_000);
    assert.equal(stepLimitMs(undefined), 60_000);
  });

  it('fails a step that never answers after the limit, with a warning naming the step', async () => {
    const { warnings, warn } = recorder();
    const started = performance.now();
    const never = new Promise<never>(() => undefined);
    await assert.rejects(timeLimited('reading the positions', never, { limitMs: 300, warn }), (error) => {
      assert.ok(error instanceof StepTimeoutError);
      assert.match(error.message, /reading the positions did not finish within 0\.3 s/);
      // Retried as a broker that does not answer: never a permanent failure.
      assert.equal(errors.isBrokerUnreachable(error), true);
      assert.equal(errors.isPermanent(error), false);
      return true;
    });
    // Timers may fire a little early on a loaded box; never much.
    assert.ok(performance.now() - started >= 250, 'not before the limit');
    assert.equal(warnings.length, 1);
    assert.match(
      warnings[0]?.message ?? '',
      /^reading the positions did not finish within 0\.3 s; giving up/,
    );
    assert.deepEqual(warnings[0]?.fields, { step: 'reading the positions', limitMs: 300 });
  });

  it('passes on a step that answers in time, and its failure, without a warning', async () => {
    const { warnings, warn } = recorder();
    assert.equal(await timeLimited('a metadata refresh', Promise.resolve(7), { limitMs: 60_000, warn }), 7);
    const failure = new Error('refused');
    await assert.rejects(
      timeLimited('a fetch from b:9092', Promise.reject(failure), { limitMs: 60_000, warn }),
      (error) => error === failure,
    );
    assert.deepEqual(warnings, []);
  });

  it('ignores a late failure of a step it gave up on (no unhandled rejection)', async () => {
    const { warn } = recorder();
    let fail: (error: Error) => void = () => undefined;
    const late = new Promise<never>((_, reject) => {
      fail = reject;
    });
    await assert.rejects(timeLimited('a fetch from b:9092', late, { limitMs: 50, warn }), StepTimeoutError);
    fail(new Error('too late'));
    await new Promise((resolve) => setImmediate(resolve));
  });
});
