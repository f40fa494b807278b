/**
 * The OpenTelemetry SDK with in-memory exporters, registered as this process's global providers (a test file is
 * its own process): what a user's SDK setup gives the `@opentelemetry/api` module they pass as `telemetry.api`.
 */
import { after } from 'node:test';
import * as api from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

export { api };

const spanExporter = new InMemorySpanExporter();
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
const metricExporter = new InMemoryMetricExporter(AggregationTemporality.DELTA);
// Exported on demand only (`metrics()` flushes): the interval is never reached.
const reader = new PeriodicExportingMetricReader({
  exporter: metricExporter,
  exportIntervalMillis: 3_600_000,
});
const meterProvider = new MeterProvider({ readers: [reader] });

api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
api.trace.setGlobalTracerProvider(tracerProvider);
api.metrics.setGlobalMeterProvider(meterProvider);

after(async () => {
  await meterProvider.shutdown();
  await tracerProvider.shutdown();
});

/** The spans ended since the last call, oldest first. */
export function takeSpans(): ReadableSpan[] {
  const spans = spanExporter.getFinishedSpans();
  spanExporter.reset();
  return [...spans];
}

/** One data point of a metric: its attributes and value (a number, or a histogram's count and sum). */
export interface Point {
  readonly attributes: Record<string, unknown>;
  readonly value: number;
  readonly count?: number;
  readonly unit: string;
}

/** The measurements recorded since the last call (delta temporality), by metric name. */
export async function takeMetrics(): Promise<Map<string, Point[]>> {
  await reader.forceFlush();
  const byName = new Map<string, Point[]>();
  for (const resource of metricExporter.getMetrics()) {
    for (const scope of resource.scopeMetrics) {
      for (const metric of scope.metrics) {
        const points = byName.get(metric.descriptor.name) ?? [];
        for (const point of metric.dataPoints as DataPoint<number | Histogram>[]) {
          const { value } = point;
          points.push(
            typeof value === 'number'
              ? { attributes: point.attributes, value, unit: metric.descriptor.unit }
              : {
                  attributes: point.attributes,
                  value: value.sum ?? 0,
                  count: value.count,
                  unit: metric.descriptor.unit,
                },
          );
        }
        byName.set(metric.descriptor.name, points);
      }
    }
  }
  metricExporter.reset();
  return byName;
}

/** A W3C `traceparent` of a made-up remote parent, and its ids. */
export function remoteParent(): { traceparent: string; traceId: string; spanId: string } {
  const traceId = randomHex(16);
  const spanId = randomHex(8);
  return { traceparent: `00-${traceId}-${spanId}-01`, traceId, spanId };
}

function randomHex(bytes: number): string {
  return Buffer.from(Array.from({ length: bytes }, () => Math.floor(Math.random() * 256))).toString('hex');
}

/** Every attribute, event and status text of the spans, for "this value appears nowhere" checks. */
export function spanText(spans: readonly ReadableSpan[]): string {
  return JSON.stringify(
    spans.map((s) => ({ name: s.name, attributes: s.attributes, events: s.events, status: s.status })),
  );
}
