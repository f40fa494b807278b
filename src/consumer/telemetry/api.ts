// The parts of `@opentelemetry/api` the consumer calls, as structural types: the optional peer is never imported,
// and the module object the user passes (`import * as api from '@opentelemetry/api'`) fits them as it is.

/** A value an attribute may hold here (a subset of the API's `AttributeValue`). */
export type TelemetryAttributeValue = string | number | boolean;

/** Span and measurement attributes. */
export type TelemetryAttributes = Readonly<Record<string, TelemetryAttributeValue | undefined>>;

/** The API's `Context`: opaque here, only handed back to the API. */
export type OtelContext = object;

/** The API's `SpanContext`, as far as a link needs it. */
export interface OtelSpanContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
}

/** The API's `Span`, as far as the consumer writes it. */
export interface OtelSpan {
  setAttribute(key: string, value: TelemetryAttributeValue): unknown;
  addEvent(name: string, attributes?: TelemetryAttributes, startTime?: number): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: Error | string): unknown;
  end(): void;
}

export interface OtelTracer {
  startSpan(
    name: string,
    options?: {
      kind?: number;
      attributes?: TelemetryAttributes;
      links?: { context: OtelSpanContext }[];
    },
    context?: OtelContext,
  ): OtelSpan;
}

export interface OtelMeter {
  createCounter(
    name: string,
    options?: { description?: string; unit?: string },
  ): { add(value: number, attributes?: TelemetryAttributes): void };
  createHistogram(
    name: string,
    options?: { description?: string; unit?: string; advice?: { explicitBucketBoundaries?: number[] } },
  ): { record(value: number, attributes?: TelemetryAttributes): void };
}

/** The API's `TextMapGetter`: how a propagator reads a carrier. */
export interface OtelGetter<C> {
  keys(carrier: C): string[];
  get(carrier: C, key: string): string | string[] | undefined;
}

/** The `@opentelemetry/api` module, as far as the consumer uses it (its version 1.3 or later). */
export interface OpenTelemetryApi {
  readonly trace: {
    getTracer(name: string, version?: string): OtelTracer;
    getSpan(context: OtelContext): OtelSpan | undefined;
    getSpanContext(context: OtelContext): OtelSpanContext | undefined;
    isSpanContextValid(spanContext: OtelSpanContext): boolean;
    setSpan(context: OtelContext, span: OtelSpan): OtelContext;
  };
  readonly context: {
    active(): OtelContext;
    // biome-ignore lint/suspicious/noExplicitAny: the API's own signature; `fn` runs with the given arguments.
    with<A extends unknown[], F extends (...args: A) => any>(
      context: OtelContext,
      fn: F,
      thisArg?: ThisParameterType<F>,
      ...args: A
    ): ReturnType<F>;
  };
  readonly propagation: {
    extract<C>(context: OtelContext, carrier: C, getter?: OtelGetter<C>): OtelContext;
  };
  readonly metrics: { getMeter(name: string, version?: string): OtelMeter };
  readonly ROOT_CONTEXT: OtelContext;
  readonly SpanKind: { readonly INTERNAL: number; readonly CONSUMER: number };
  readonly SpanStatusCode: { readonly ERROR: number };
}

/** The `telemetry` option of the consumer and the HTTP adapter. */
export interface TelemetryOptions {
  /** The `@opentelemetry/api` module: `import * as api from '@opentelemetry/api'`. Nothing is loaded without it. */
  readonly api: OpenTelemetryApi;
  /** Put ids and error messages on spans (off by default: they can be personal data). */
  readonly recordIds?: boolean;
}

/** A message's headers, where its trace context is read: an object, or a function of a header's name. */
export type TraceCarrier = Readonly<Record<string, unknown>> | ((name: string) => unknown);

/** What a caller of `processBatch` tells the consumer's telemetry about a batch's messages. */
export interface TraceSource {
  /** `consumer` for messages read from a broker, as the messaging conventions say; default `internal`. */
  readonly kind?: 'consumer' | 'internal';
  /** Attributes of every span and measurement of the batch: keep them few-valued, they split the metrics. */
  readonly attributes?: TelemetryAttributes;
  /** Attributes of message `index`'s span only (many-valued ones: an offset). */
  readonly attributesOf?: (index: number) => TelemetryAttributes | undefined;
  /** Message `index`'s headers, where its incoming trace context (`traceparent`) is read. */
  readonly headersOf?: (index: number) => TraceCarrier | undefined;
  /** True for a message the caller declined to run, to read it again later: no outcome is reported for it. */
  readonly declined?: (index: number) => boolean;
}
