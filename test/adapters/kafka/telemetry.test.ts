import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type KafkaRecord, kafkaRecordId, runIdempotentConsumer } from '../../../src/adapters/kafka/index.js';
import { IdempotentConsumer, type OutcomeEvent } from '../../../src/consumer/index.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import {
  kafkaTestbed,
  onCleanup,
  onTestClient,
  produce,
  testProducer,
  waitForCommitted,
} from '../../helpers/kafka.js';
import { api, remoteParent, takeMetrics, takeSpans } from '../../helpers/otel.js';
import { skipUnlessEnabled } from '../../helpers/stores.js';

describe('the Kafka adapter with telemetry', { skip: skipUnlessEnabled('kafka') }, () => {
  it("gives each record a consumer span continuing its traceparent, and reports each record's outcome once", async (t) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t, { partitions: 1 });
    // k2 fails once: records after it in its sub-batch are declined, read again, and reported only then.
    const keys = ['k0', 'k1', 'k2', 'k3', 'k0', 'k4'];
    const parents = keys.map(() => remoteParent());
    await produce(
      await testProducer(t, kafka),
      topic,
      keys.map((key, i) => ({
        key,
        value: `v${i}`,
        headers: { traceparent: (parents[i] as ReturnType<typeof remoteParent>).traceparent },
      })),
    );
    takeSpans();
    await takeMetrics();
    const events: OutcomeEvent[] = [];
    let failures = 0;
    const runner = await runIdempotentConsumer(
      onTestClient({
        kafka,
        topics: [topic],
        groupId,
        fromBeginning: true,
        retry: { initialMs: 20, maxMs: 200 },
        idempotent: new IdempotentConsumer<KafkaRecord>({
          repository: new MemoryRepository(),
          id: kafkaRecordId,
          telemetry: { api },
          onOutcome: (event) => events.push(event),
        }),
        handler: (_record, context) => {
          if (context.id === 'k2' && failures++ === 0) throw new Error('transient');
        },
        onError: () => {},
      }),
    );
    onCleanup(t, () => runner.stop());
    await waitForCommitted(admin, groupId, topic);

    // Each record's final outcome once, the failed attempt before it; nothing for a declined record.
    const told = events.map((e) => `${e.place?.offset} ${e.id} ${e.outcome}`);
    assert.deepEqual(
      [...told].sort(),
      [
        '0 k0 processed',
        '1 k1 processed',
        '2 k2 failed',
        '2 k2 processed',
        '3 k3 processed',
        '4 k0 duplicate',
        '5 k4 processed',
      ],
      told.join(', '),
    );
    assert.ok(told.indexOf('2 k2 failed') < told.indexOf('2 k2 processed'));
    const failed = events.find((e) => e.outcome === 'failed');
    assert.equal((failed?.result.error as Error | undefined)?.message, 'transient');

    const spans = takeSpans().filter((s) => s.name === 'idempotency.process');
    const reported = spans.filter((s) => s.attributes['idempotency.outcome'] !== undefined);
    assert.equal(reported.length, events.length);
    for (const span of spans.filter((s) => s.attributes['idempotency.outcome'] === undefined)) {
      assert.equal(
        span.attributes['idempotency.declined'],
        true,
        'a span without outcome is a declined record',
      );
    }
    for (const span of spans) {
      const offset = span.attributes['messaging.kafka.offset'] as number;
      const parent = parents[offset] as ReturnType<typeof remoteParent>;
      assert.equal(span.kind, api.SpanKind.CONSUMER);
      assert.equal(span.spanContext().traceId, parent.traceId, `offset ${offset} continues its trace`);
      assert.equal(span.parentSpanContext?.spanId, parent.spanId);
      assert.equal(span.attributes['messaging.system'], 'kafka');
      assert.equal(span.attributes['messaging.destination.name'], topic);
      assert.equal(span.attributes['messaging.destination.partition.id'], '0');
      assert.equal(span.attributes['messaging.consumer.group.name'], groupId);
      assert.equal(span.attributes['idempotency.id'], undefined);
    }

    const metrics = await takeMetrics();
    const counted: Record<string, number> = {};
    for (const point of metrics.get('idempotency.messages') ?? []) {
      assert.equal(point.attributes['messaging.destination.name'], topic);
      assert.equal(
        point.attributes['messaging.kafka.offset'],
        undefined,
        'no per-record attribute on a metric',
      );
      const outcome = point.attributes['idempotency.outcome'] as string;
      counted[outcome] = (counted[outcome] ?? 0) + point.value;
    }
    assert.deepEqual(counted, { processed: 5, duplicate: 1, failed: 1 });
    const process = metrics.get('messaging.process.duration') ?? [];
    assert.equal(
      process.reduce((n, p) => n + (p.count ?? 0), 0),
      7,
    );
    assert.ok(process.every((p) => p.attributes['messaging.operation.name'] === 'process'));
  });
});
