import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { NoMessageIdError } from '../../../src/errors.js';
import { deadLetterMessage, dlqHeaders, MAX_ERROR_CHARS, readDeadLetter } from '../../../src/kafka/index.js';

const source = {
  key: Buffer.from('k1'),
  value: Buffer.from('{"id":1}'),
  headers: { trace: Buffer.from('t-1'), [dlqHeaders.reason]: 'stale' },
  offset: '17',
  timestamp: '1700000000000',
};

describe('kafka dead letters', () => {
  it('keeps key, value and headers and adds where the record came from and why', () => {
    const message = deadLetterMessage({
      topic: 'orders',
      partition: 2,
      message: source,
      reason: 'handler-failed',
      error: new Error('boom'),
      attempts: 5,
    });
    assert.equal(message.key, source.key);
    assert.equal(message.value, source.value);
    assert.equal(message.partition, undefined, 'the partitioner places it by key');
    assert.equal(message.headers?.trace, source.headers.trace);
    assert.deepEqual(readDeadLetter(message.headers), {
      reason: 'handler-failed',
      error: 'boom',
      errorType: 'Error',
      topic: 'orders',
      partition: 2,
      offset: '17',
      attempts: 5,
      timestamp: '1700000000000',
    });
  });

  it('uses the error code as the type, truncates long messages, and reads nothing from a plain record', () => {
    const coded = deadLetterMessage({
      topic: 't',
      partition: 0,
      message: source,
      reason: 'no-id',
      error: new NoMessageIdError(),
      attempts: 0,
    });
    assert.equal(readDeadLetter(coded.headers)?.errorType, NoMessageIdError.code);
    const long = deadLetterMessage({
      topic: 't',
      partition: 0,
      message: source,
      reason: 'invalid-json',
      error: 'x'.repeat(10_000),
      attempts: 0,
    });
    assert.equal(readDeadLetter(long.headers)?.error.length, MAX_ERROR_CHARS);
    assert.equal(readDeadLetter(long.headers)?.errorType, undefined);
    assert.equal(readDeadLetter({ trace: 'x' }), undefined);
  });
});
