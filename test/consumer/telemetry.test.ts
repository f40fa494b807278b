import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import {
  IdempotentConsumer,
  type IdempotentConsumerOptions,
  type OutcomeEvent,
} from '../../src/consumer/index.js';
import { ConfigError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { api, remoteParent, spanText, takeMetrics, takeSpans } from '../helpers/otel.js';

interface Msg {
  readonly id: string;
  readonly n?: number;
}

function consumer(options: Partial<IdempotentConsumerOptions<Msg>> = {}): IdempotentConsumer<Msg> {
  return new IdempotentConsumer<Msg>({
    repository: new MemoryRepository(),
    id: 'id',
    telemetry: { api },
    ...options,
  });
}

// Each test reads only its own spans.
beforeEach(() => {
  takeSpans();
});

const eventNames = (span: { events: readonly { name: string }[] }) => span.events.map((e) => e.name);

describe('telemetry: spans', () => {
  it('gives each message a span with its outcome, mode, store and store calls, under the active span', async () => {
    const c = consumer();
    const tracer = api.trace.getTracer('test');
    await tracer.startActiveSpan('parent', async (parent) => {
      await c.process({ id: 'a' }, () => 'ok');
      await c.process({ id: 'a' }, () => 'ok');
      parent.end();
    });
    const all = takeSpans();
    const parent = (all.find((s) => s.name === 'parent') as (typeof all)[0]).spanContext();
    const spans = all.filter((s) => s.name === 'idempotency.process');
    assert.equal(spans.length, 2);
    const [first, second] = spans as [(typeof spans)[0], (typeof spans)[0]];
    assert.deepEqual(
      { ...first.attributes },
      { 'idempotency.mode': 'eager', 'idempotency.store': 'memory', 'idempotency.outcome': 'processed' },
    );
    assert.equal(second.attributes['idempotency.outcome'], 'duplicate');
    assert.equal(first.kind, api.SpanKind.INTERNAL);
    // Eager: the lookup is the claim; then the handler; then the confirm.
    assert.deepEqual(eventNames(first), ['lookup', 'handler', 'confirm']);
    assert.deepEqual(eventNames(second), ['lookup']);
    for (const event of first.events)
      assert.equal(typeof event.attributes?.['idempotency.duration_ms'], 'number');
    for (const span of spans) {
      assert.equal(span.parentSpanContext?.spanId, parent.spanId);
      assert.equal(span.spanContext().traceId, parent.traceId);
    }
  });

  it("continues each message's own trace context from its headers (text or bytes)", async () => {
    const c = consumer();
    const one = remoteParent();
    const two = remoteParent();
    const headers = [{ traceparent: one.traceparent }, { traceparent: Buffer.from(two.traceparent) }, {}];
    await c.processBatch([{ id: 'a' }, { id: 'b' }, { id: 'c' }], () => 'ok', {
      trace: { kind: 'consumer', headersOf: (i) => headers[i], attributes: { 'messaging.system': 'test' } },
    });
    const spans = takeSpans();
    assert.equal(spans.length, 3);
    const [a, b, c3] = spans as [(typeof spans)[0], (typeof spans)[0], (typeof spans)[0]];
    assert.equal(a.spanContext().traceId, one.traceId);
    assert.equal(a.parentSpanContext?.spanId, one.spanId);
    assert.equal(b.spanContext().traceId, two.traceId);
    assert.equal(b.parentSpanContext?.spanId, two.spanId);
    assert.equal(c3.parentSpanContext, undefined, 'no header, no active span: a root span');
    assert.equal(a.kind, api.SpanKind.CONSUMER);
    assert.equal(a.attributes['messaging.system'], 'test');
  });

  it('links the header context when a span is already active (an instrumentation continued the trace)', async () => {
    const c = consumer();
    const remote = remoteParent();
    await api.trace.getTracer('test').startActiveSpan('server', async (server) => {
      await c.process({ id: 'a' }, () => 'ok', { trace: { headersOf: () => remote } });
      server.end();
    });
    const [span, server] = takeSpans() as [ReturnType<typeof takeSpans>[0], ReturnType<typeof takeSpans>[0]];
    assert.equal(span.parentSpanContext?.spanId, server.spanContext().spanId);
    assert.deepEqual(
      span.links.map((l) => l.context.spanId),
      [remote.spanId],
    );
  });

  it("runs the handler in its message's span, so the handler's own spans are children of it", async () => {
    const c = consumer();
    await c.process({ id: 'a' }, async () => {
      await new Promise((resolve) => setImmediate(resolve));
      api.trace.getTracer('test').startSpan('side effect').end();
    });
    const spans = takeSpans();
    const effect = spans.find((s) => s.name === 'side effect');
    const message = spans.find((s) => s.name === 'idempotency.process');
    assert.ok(effect && message);
    assert.equal(effect.parentSpanContext?.spanId, message.spanContext().spanId);
  });

  it('puts no id and no error message on a span unless recordIds is set', async () => {
    const secret = 'user-4711@example.com';
    const fail = () => {
      throw new Error(`cannot charge ${secret}`);
    };
    const quiet = consumer();
    await assert.rejects(quiet.process({ id: secret }, fail));
    await quiet.process({ id: secret }, () => 'ok');
    await quiet.process({ id: secret }, () => 'ok');
    const spans = takeSpans();
    assert.equal(spans.length, 3);
    assert.ok(!spanText(spans).includes('4711'), spanText(spans));
    const failed = spans[0] as (typeof spans)[0];
    assert.equal(failed.attributes['idempotency.outcome'], 'failed');
    assert.equal(failed.attributes['error.type'], 'Error');
    assert.equal(failed.status.code, api.SpanStatusCode.ERROR);
    assert.deepEqual(eventNames(failed), ['lookup', 'handler', 'release']);

    const open = consumer({ telemetry: { api, recordIds: true } });
    await assert.rejects(open.process({ id: secret }, fail));
    const [recorded] = takeSpans() as [(typeof spans)[0]];
    assert.equal(recorded.attributes['idempotency.id'], secret);
    assert.match(recorded.status.message ?? '', /4711/);
    assert.ok(eventNames(recorded).includes('exception'));
  });

  it('marks replays, fail-open and conflicts on the span', async () => {
    const c = consumer({ storeResult: true, fingerprint: ['n'] });
    await c.process({ id: 'a', n: 1 }, () => 'kept');
    await c.process({ id: 'a', n: 1 }, () => 'kept');
    await c.process({ id: 'a', n: 2 }, () => 'kept');
    const [, replay, conflict] = takeSpans() as ReturnType<typeof takeSpans>;
    assert.equal(replay?.attributes['idempotency.replayed'], true);
    assert.equal(conflict?.attributes['idempotency.outcome'], 'conflict');
    assert.equal(conflict?.attributes['error.type'], 'IdempotencyConflictError');
  });

  it('ends every span as failed when the call rejects on a store failure, and reports no outcome', async () => {
    const repository = new MemoryRepository();
    await repository.close();
    const outcomes: OutcomeEvent[] = [];
    const c = consumer({ repository, onOutcome: (e) => outcomes.push(e) });
    await assert.rejects(c.processBatch([{ id: 'a' }, { id: 'b' }], () => 'ok'));
    const spans = takeSpans();
    assert.equal(spans.length, 2);
    for (const span of spans) {
      assert.equal(span.status.code, api.SpanStatusCode.ERROR);
      assert.equal(span.attributes['idempotency.outcome'], undefined);
      assert.ok(span.attributes['error.type']);
    }
    assert.deepEqual(outcomes, []);
  });

  it('names event-time mode and lazy mode, and a custom store', async () => {
    // A repository written as a plain object: its type is `custom`.
    const memory = new MemoryRepository();
    const custom: IdempotentRepository = {
      capabilities: memory.capabilities,
      add: (...a) => memory.add(...a),
      addMany: (...a) => memory.addMany(...a),
      markMany: (...a) => memory.markMany(...a),
      contains: (...a) => memory.contains(...a),
      containsMany: (...a) => memory.containsMany(...a),
      get: (...a) => memory.get(...a),
      getMany: (...a) => memory.getMany(...a),
      confirm: (...a) => memory.confirm(...a),
      confirmMany: (...a) => memory.confirmMany(...a),
      remove: (...a) => memory.remove(...a),
      clear: () => memory.clear(),
      close: () => memory.close(),
    };
    await consumer({ repository: custom, mode: 'lazy' }).process({ id: 'a' }, () => 'ok');
    await consumer({ eventTime: { intervalMs: 1_000, timestamp: () => 5 } }).process({ id: 'a' }, () => 'ok');
    const [lazy, eventTime] = takeSpans() as ReturnType<typeof takeSpans>;
    assert.equal(lazy?.attributes['idempotency.mode'], 'lazy');
    assert.equal(lazy?.attributes['idempotency.store'], 'custom');
    assert.deepEqual(eventNames(lazy as NonNullable<typeof lazy>), ['lookup', 'handler', 'mark']);
    assert.equal(eventTime?.attributes['idempotency.mode'], 'event-time');
  });
});

describe('telemetry: metrics', () => {
  it('counts messages by outcome and records process and store durations in seconds', async () => {
    await takeMetrics();
    const c = consumer();
    await c.process({ id: 'a' }, () => 'ok');
    await c.process({ id: 'a' }, () => 'ok');
    await assert.rejects(c.process({ id: 'b' }, () => Promise.reject(new Error('no'))));
    const metrics = await takeMetrics();

    const messages = metrics.get('idempotency.messages') ?? [];
    const byOutcome = Object.fromEntries(messages.map((p) => [p.attributes['idempotency.outcome'], p.value]));
    assert.deepEqual(byOutcome, { processed: 1, duplicate: 1, failed: 1 });
    const failed = messages.find((p) => p.attributes['idempotency.outcome'] === 'failed');
    assert.equal(failed?.attributes['error.type'], 'Error');
    assert.equal(failed?.attributes['idempotency.store'], 'memory');
    assert.equal(failed?.attributes['idempotency.mode'], 'eager');

    const process = metrics.get('messaging.process.duration') ?? [];
    assert.equal(
      process.reduce((n, p) => n + (p.count ?? 0), 0),
      3,
    );
    assert.equal(process[0]?.unit, 's');

    const store = metrics.get('idempotency.store.duration') ?? [];
    const calls = Object.fromEntries(
      store.map((p) => [p.attributes['idempotency.store.operation'], p.count]),
    );
    assert.deepEqual(calls, { lookup: 3, confirm: 1, release: 1 });
    assert.equal(store[0]?.unit, 's');
    // Sub-second calls are measured in seconds, not milliseconds.
    for (const p of store) assert.ok(p.value < (p.count ?? 0) * 5, `${p.value} s for ${p.count} calls`);
  });
});

describe('onOutcome', () => {
  it('tells each settled message its id, outcome, result, place and durations, without OpenTelemetry', async () => {
    const events: OutcomeEvent[] = [];
    const c = consumer({ telemetry: undefined, onOutcome: (e) => events.push(e) });
    await c.processBatch(
      [{ id: 'a' }, { id: 'a' }, { id: 'b' }],
      async (m) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        if (m.id === 'b') throw new Error('no');
        return 'ok';
      },
      { placeOf: (i) => ({ offset: i }) },
    );
    assert.deepEqual(
      events.map((e) => [e.id, e.outcome, e.place?.offset]),
      [
        ['a', 'processed', 0],
        ['a', 'duplicate', 1],
        ['b', 'failed', 2],
      ],
    );
    const [processed, duplicate, failed] = events as [OutcomeEvent, OutcomeEvent, OutcomeEvent];
    assert.equal(processed.result.result, 'ok');
    assert.ok((processed.handlerMs ?? 0) >= 4, `handler ${processed.handlerMs} ms`);
    assert.equal(duplicate.handlerMs, undefined);
    assert.ok(failed.result.error instanceof Error);
    assert.ok(processed.durationMs >= (processed.handlerMs ?? 0) + (failed.handlerMs ?? 0));
    assert.ok(processed.storeMs >= 0);
    assert.equal(takeSpans().length, 0, 'no telemetry option: no spans');
  });

  it('times a whole-batch handler for each message it was given', async () => {
    const events: OutcomeEvent[] = [];
    const c = consumer({ onOutcome: (e) => events.push(e) });
    await c.processBatch([{ id: 'a' }, { id: 'b' }], {
      batch: async () => {
        await new Promise((resolve) => setTimeout(resolve, 5));
      },
    });
    assert.deepEqual(
      events.map((e) => e.outcome),
      ['processed', 'processed'],
    );
    for (const e of events) assert.ok((e.handlerMs ?? 0) >= 4, `handler ${e.handlerMs} ms`);
    for (const span of takeSpans()) assert.deepEqual(eventNames(span), ['lookup', 'handler', 'confirm']);
  });

  it('warns when the hook throws, and the outcome stands', async () => {
    const warnings: string[] = [];
    const c = consumer({
      onOutcome: () => {
        throw new Error('hook bug');
      },
      onWarning: (_message, code) => warnings.push(code),
    });
    const result = await c.process({ id: 'a' }, () => 'ok');
    assert.equal(result.outcome, 'processed');
    assert.deepEqual(warnings, ['IDEM_ON_OUTCOME_FAILED']);
    assert.equal(c.stats.processed, 1);
  });
});

describe('telemetry option', () => {
  it('must be the @opentelemetry/api module', () => {
    assert.throws(
      () => consumer({ telemetry: { api: {} as typeof api } }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /telemetry\.api/.test(error.message) &&
        /opentelemetry/.test(error.message),
    );
    assert.throws(
      () => consumer({ telemetry: { api, recordId: true } as never }),
      (error: unknown) => error instanceof ConfigError && /recordId/.test(error.message),
    );
  });
});
