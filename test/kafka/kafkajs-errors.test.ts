import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, it } from 'node:test';
import { kafkajsErrors } from '../../src/kafka/kafkajs/index.js';

// kafkajs's own error classes, as its connections throw them (the package exports only some of them).
const { KafkaJSConnectionClosedError, KafkaJSConnectionError } = createRequire(import.meta.url)(
  'kafkajs/src/errors.js',
) as Record<string, new (message: string, details?: object) => Error>;

describe('kafkajs errors, as the port classifies them', () => {
  it('a connection closed under a request (a broker stopping) is the broker unreachable, not permanent', () => {
    // Seen when a ListOffsets met a broker's shutdown: the caller's recovery must treat it as an outage.
    const closed = new (KafkaJSConnectionClosedError as NonNullable<typeof KafkaJSConnectionClosedError>)(
      'Closed connection',
      { host: '127.0.0.1', port: 9092 },
    );
    assert.equal(kafkajsErrors.isBrokerUnreachable(closed), true);
    assert.equal(kafkajsErrors.isPermanent(closed), false);
    const wrapped = new Error('reading the changelog ends', { cause: closed });
    assert.equal(kafkajsErrors.isBrokerUnreachable(wrapped), true);
  });

  it('a connection error is the broker unreachable', () => {
    const refused = new (KafkaJSConnectionError as NonNullable<typeof KafkaJSConnectionError>)(
      'Connection error: connect ECONNREFUSED 127.0.0.1:1',
    );
    assert.equal(kafkajsErrors.isBrokerUnreachable(refused), true);
    assert.equal(kafkajsErrors.isPermanent(refused), false);
  });
});
