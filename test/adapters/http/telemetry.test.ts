import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { beforeEach, describe, it } from 'node:test';
import express from 'express';
import { idempotencyKey } from '../../../src/adapters/http/index.js';
import type { OutcomeEvent } from '../../../src/consumer/index.js';
import { ConfigError } from '../../../src/errors.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import { api, remoteParent, spanText, takeMetrics, takeSpans } from '../../helpers/otel.js';
import { type Framework, startApp } from './apps.js';

beforeEach(() => {
  takeSpans();
});

function post(url: string, key: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-user': 'u1', ...headers },
    body: JSON.stringify({ amount: 100 }),
  });
}

for (const framework of ['express', 'fastify'] as Framework[]) {
  describe(`HTTP Idempotency-Key with telemetry (${framework})`, () => {
    it('gives each keyed request a span continuing its traceparent, with the outcome, and tells onOutcome', async (t) => {
      await takeMetrics();
      const events: OutcomeEvent[] = [];
      const app = await startApp(framework, {
        repository: new MemoryRepository(),
        telemetry: { api },
        onOutcome: (event) => events.push(event),
      });
      t.after(() => app.close());
      const key = randomUUID();
      const first = remoteParent();
      const second = remoteParent();
      assert.equal((await post(`${app.url}/charges`, key, { traceparent: first.traceparent })).status, 201);
      const replay = await post(`${app.url}/charges`, key, { traceparent: second.traceparent });
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal((await post(`${app.url}/flaky`, randomUUID())).status, 500);
      assert.equal((await fetch(`${app.url}/ping`)).status, 200);

      const spans = takeSpans();
      assert.deepEqual(
        spans.map((s) => s.attributes['idempotency.outcome']),
        ['processed', 'duplicate', 'failed'],
      );
      const [processed, duplicate, failed] = spans as [
        (typeof spans)[0],
        (typeof spans)[0],
        (typeof spans)[0],
      ];
      assert.equal(processed.spanContext().traceId, first.traceId);
      assert.equal(processed.parentSpanContext?.spanId, first.spanId);
      assert.equal(duplicate.spanContext().traceId, second.traceId);
      assert.equal(duplicate.attributes['idempotency.replayed'], true);
      assert.equal(processed.attributes['http.request.method'], 'POST');
      assert.deepEqual(
        processed.events.map((e) => e.name),
        ['lookup', 'handler', 'confirm'],
      );
      // A 5xx gives the key back: the request failed, and its claim was released.
      assert.equal(failed.status.code, api.SpanStatusCode.ERROR);
      assert.ok(failed.events.some((e) => e.name === 'release'));
      assert.ok(!spanText(spans).includes(key), 'the key is on no span');

      assert.deepEqual(
        events.map((e) => e.outcome),
        ['processed', 'duplicate', 'failed'],
      );
      assert.ok((events[0]?.handlerMs ?? 0) > 0, 'the route ran inside the handler');
      const counted = (await takeMetrics()).get('idempotency.messages') ?? [];
      assert.equal(
        counted.reduce((n, p) => n + p.value, 0),
        3,
      );
    });
  });
}

describe('HTTP Idempotency-Key under an HTTP server span', () => {
  it("is the server span's child, linked to the request's traceparent", async (t) => {
    const app = express();
    const tracer = api.trace.getTracer('test');
    // What an HTTP instrumentation does: the request runs in a server span that continues the traceparent.
    app.use((_req, res, next) => {
      tracer.startActiveSpan('server', (span) => {
        res.on('finish', () => span.end());
        next();
      });
    });
    app.use(express.json());
    app.use(idempotencyKey({ repository: new MemoryRepository(), scope: () => 'u1', telemetry: { api } }));
    app.post('/charges', (_req, res) => {
      res.status(201).json({ ok: true });
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(() => new Promise((resolve) => server.close(resolve)));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const remote = remoteParent();
    assert.equal(
      (await post(`${url}/charges`, randomUUID(), { traceparent: remote.traceparent })).status,
      201,
    );
    // The server span ends once the response is written, after the key was kept.
    const spans = await waitForSpans(2);
    const serverSpan = spans.find((s) => s.name === 'server');
    const span = spans.find((s) => s.name === 'idempotency.process');
    assert.ok(serverSpan && span);
    assert.equal(span.parentSpanContext?.spanId, serverSpan.spanContext().spanId);
    assert.deepEqual(
      span.links.map((l) => l.context.spanId),
      [remote.spanId],
    );
  });

  it('checks the telemetry option as the adapter names it', () => {
    assert.throws(
      () => idempotencyKey({ repository: new MemoryRepository(), telemetry: { api: {} as typeof api } }),
      (error: unknown) => error instanceof ConfigError && /idempotencyKey\(\.\.\.\)/.test(error.message),
    );
  });
});

/** The spans ended so far, once there are `n` (a span may end just after the response reached the client). */
async function waitForSpans(n: number): Promise<ReturnType<typeof takeSpans>> {
  const spans: ReturnType<typeof takeSpans> = [];
  const deadline = Date.now() + 10_000;
  while (spans.length < n) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${n} spans (have ${spans.length})`);
    spans.push(...takeSpans());
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return spans;
}
