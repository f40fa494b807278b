import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Kafka } from 'kafkajs';
import { resolveKafkaAdapterOptions } from '../../../src/adapters/kafka/options.js';
import { BlockedRecord, backoffMs } from '../../../src/adapters/kafka/retry.js';
import { type KafkaRecord, kafkaRecordId } from '../../../src/adapters/kafka/types.js';
import { IdempotentConsumer } from '../../../src/consumer/index.js';
import { ConfigError } from '../../../src/errors.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';

// Never connects: options are checked before any client is used.
const kafka = new Kafka({ brokers: ['127.0.0.1:1'] });
const idempotent = new IdempotentConsumer<KafkaRecord>({
  repository: new MemoryRepository(),
  id: kafkaRecordId,
});
const base = { kafka, topics: ['t'], groupId: 'g', idempotent, handler: () => undefined };

function configError(options: object, key: string): void {
  assert.throws(
    () => resolveKafkaAdapterOptions({ ...base, ...options } as typeof base),
    (error) => error instanceof ConfigError && error.key === key,
    key,
  );
}

describe('kafka adapter options', () => {
  it('applies the defaults', () => {
    const resolved = resolveKafkaAdapterOptions(base);
    assert.deepEqual(resolved.id, { from: 'key' });
    assert.equal(resolved.batchSize, 500);
    assert.deepEqual(resolved.retry, {
      initialMs: 200,
      maxMs: 30_000,
      multiplier: 2,
      jitter: 0.2,
      maxAttempts: 5,
    });
    assert.equal(resolved.dlq, undefined);
    const custom = resolveKafkaAdapterOptions({ ...base, retry: { initialMs: '1s', maxAttempts: 2 } });
    assert.equal(custom.retry.initialMs, 1_000);
    assert.equal(custom.retry.maxAttempts, 2);
  });

  it('names the option that is wrong', () => {
    configError({ topics: [] }, 'topics');
    configError({ id: { from: 'value' } }, 'id.path');
    configError({ retry: { initialMs: 500, maxMs: 100 } }, 'retry.maxMs');
    configError({ retry: { maxAttempts: 0 } }, 'retry.maxAttempts');
    configError({ unknown: 1 }, 'unknown');
    configError({ retry: { initial: 5 } }, 'retry.initial');
    configError({ groupId: undefined }, 'groupId');
    configError({ kafka: undefined }, 'kafka');
    configError(
      { kafka: undefined, consumer: kafka.consumer({ groupId: 'g' }), dlq: { topic: 'd' } },
      'dlq.producer',
    );
    const byPath = new IdempotentConsumer<KafkaRecord>({
      repository: new MemoryRepository(),
      id: 'message.key',
    });
    configError({ idempotent: byPath }, 'idempotent.id');
    const keeps = new IdempotentConsumer<KafkaRecord>({
      repository: new MemoryRepository(),
      id: kafkaRecordId,
      removeOnFailure: false,
    });
    configError({ idempotent: keeps }, 'idempotent.removeOnFailure');
  });

  it('backs off exponentially up to the cap, with jitter taken off', () => {
    const retry = { initialMs: 100, maxMs: 1_000, multiplier: 2, jitter: 0.5 };
    const none = () => 0;
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6].map((n) => backoffMs(n, retry, none)),
      [100, 200, 400, 800, 1_000, 1_000],
    );
    assert.equal(
      backoffMs(1, retry, () => 1),
      50,
    );
    const record = new BlockedRecord('7');
    assert.equal(record.count('handler'), 1);
    assert.equal(record.count('in-progress'), 1);
    assert.equal(record.count('handler'), 2);
    assert.equal(record.handlerFailures, 2);
  });
});
