import { errorMessage } from '../../errors.js';
import type { IdempotentRepository } from '../../store/types.js';
import type { WarningSink } from '../lease-renewal.js';
import type { IdempotentConsumerOptions } from '../options.js';
import type {
  BatchHandler,
  BatchItem,
  BatchItemFailures,
  BatchOptions,
  HandlerContext,
  OutcomeEvent,
  ProcessResult,
  StoreCall,
} from '../types.js';
import type {
  OpenTelemetryApi,
  OtelContext,
  OtelGetter,
  OtelSpan,
  OtelSpanContext,
  TelemetryAttributes,
  TraceCarrier,
  TraceSource,
} from './api.js';

const SCOPE = 'idempotent-consumer';

type TelemetrySettings = Pick<IdempotentConsumerOptions<unknown>, 'telemetry' | 'onOutcome' | 'repository'>;

/** Seconds; the messaging conventions' buckets for process durations, with finer ones for fast store calls. */
const BUCKETS = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
];

/** The instruments of a consumer with the `telemetry` option. */
type Otel = ReturnType<typeof instruments>;

/**
 * A consumer's spans, metrics and `onOutcome` hook: made only when `telemetry` or `onOutcome` is set. `base`:
 * the attributes of every span and measurement, the mode (`eager`, `lazy` or `event-time`) and the store's type.
 */
export function consumerTelemetry(options: TelemetrySettings, mode: string, warn: WarningSink) {
  const { telemetry, onOutcome, repository } = options;
  const base: TelemetryAttributes = { 'idempotency.mode': mode, 'idempotency.store': storeType(repository) };
  const otel = telemetry && instruments(telemetry.api, telemetry.recordIds === true);
  return { otel, onOutcome, warn, base } as const;
}

export type ConsumerTelemetry = ReturnType<typeof consumerTelemetry>;

function instruments(api: OpenTelemetryApi, recordIds: boolean) {
  const meter = api.metrics.getMeter(SCOPE);
  const advice = { explicitBucketBoundaries: BUCKETS };
  return {
    api,
    recordIds,
    tracer: api.trace.getTracer(SCOPE),
    messages: meter.createCounter('idempotency.messages', {
      description: 'Messages the idempotent consumer settled, by outcome',
      unit: '{message}',
    }),
    processSeconds: meter.createHistogram('messaging.process.duration', {
      description: 'Duration of processing a message: its claim, handler and settle',
      unit: 's',
      advice,
    }),
    storeSeconds: meter.createHistogram('idempotency.store.duration', {
      description: 'Duration of the idempotency store calls, by operation',
      unit: 's',
      advice,
    }),
  } as const;
}

/** One batch's spans and timings; the engine tells it of handlers, store calls and the settled results. */
export class BatchTelemetry {
  readonly #owner: ConsumerTelemetry;
  readonly #options: BatchOptions;
  readonly #source: TraceSource | undefined;
  readonly #start = performance.now();
  #storeMs = 0;
  readonly #handlerStart: (number | undefined)[] = [];
  readonly #handlerMs: (number | undefined)[] = [];
  /** One span per message, and the context its handler runs in (with `telemetry`). */
  readonly #spans: OtelSpan[] | undefined;
  readonly #contexts: OtelContext[] | undefined;
  #ended = false;
  /** The batch's store-call observer: timings, events and metrics, then the caller's `onStoreCall`. */
  readonly observe: (call: StoreCall) => void;

  constructor(owner: ConsumerTelemetry, ids: readonly (string | undefined)[], options: BatchOptions) {
    this.#owner = owner;
    this.#options = options;
    this.#source = options.trace;
    this.observe = (call) => {
      this.#stored(call);
      options.onStoreCall?.(call);
    };
    const { otel } = owner;
    if (otel === undefined) return;
    const { api } = otel;
    const active = api.context.active();
    const activeSpan = api.trace.getSpan(active);
    const source = this.#source;
    const kind = source?.kind === 'consumer' ? api.SpanKind.CONSUMER : api.SpanKind.INTERNAL;
    const spans: OtelSpan[] = [];
    const contexts: OtelContext[] = [];
    for (let i = 0; i < ids.length; i++) {
      // A child of the active span (an HTTP server's), linked to the message's trace; else the headers' child.
      const carrier = source?.headersOf?.(i);
      let parent = active;
      let links: { context: OtelSpanContext }[] | undefined;
      if (carrier !== undefined && activeSpan === undefined) {
        parent = api.propagation.extract(active, carrier, carrierGetter);
      } else if (carrier !== undefined && activeSpan !== undefined) {
        const remote = api.trace.getSpanContext(
          api.propagation.extract(api.ROOT_CONTEXT, carrier, carrierGetter),
        );
        if (remote !== undefined && api.trace.isSpanContextValid(remote)) links = [{ context: remote }];
      }
      const id = ids[i];
      const span = otel.tracer.startSpan(
        'idempotency.process',
        {
          kind,
          attributes: {
            ...owner.base,
            ...source?.attributes,
            ...source?.attributesOf?.(i),
            ...(otel.recordIds && id !== undefined ? { 'idempotency.id': id } : undefined),
          },
          links,
        },
        parent,
      );
      spans.push(span);
      contexts.push(api.trace.setSpan(parent, span));
    }
    this.#spans = spans;
    this.#contexts = contexts;
  }

  /** Runs message `i`'s handler, timed, in its span's context. */
  call<M, R>(
    i: number,
    handler: (message: M, context: HandlerContext) => R,
    message: M,
    context: HandlerContext,
  ): R {
    this.#handlerStart[i] = performance.now();
    const active = this.#contexts?.[i];
    if (active === undefined) return handler(message, context);
    return (this.#owner.otel as Otel).api.context.with(active, handler, undefined, message, context);
  }

  /** Message `i`'s handler answered (or threw). */
  handled(i: number): void {
    const start = this.#handlerStart[i];
    if (start === undefined) return;
    this.#handlerStart[i] = undefined;
    const ms = performance.now() - start;
    this.#handlerMs[i] = ms;
    this.#spans?.[i]?.addEvent('handler', { 'idempotency.duration_ms': ms }, start);
  }

  /** Runs a whole-batch handler, timed for each of its messages. */
  async callBatch<M>(
    handler: BatchHandler<M>,
    items: readonly BatchItem<M>[],
    // biome-ignore lint/suspicious/noConfusingVoidType: the whole-batch handler's own answer.
  ): Promise<BatchItemFailures | void> {
    const start = performance.now();
    for (const item of items) this.#handlerStart[item.index] = start;
    try {
      return await handler.batch(items);
    } finally {
      for (const item of items) this.handled(item.index);
    }
  }

  #stored(call: StoreCall): void {
    if (this.#ended) return;
    this.#storeMs += call.ms;
    const { otel, base } = this.#owner;
    if (otel === undefined) return;
    const error = call.error === undefined ? undefined : { 'error.type': typeOf(call.error) };
    const start = performance.now() - call.ms;
    const event = { 'idempotency.duration_ms': call.ms, ...error };
    for (const span of this.#spans as OtelSpan[]) span.addEvent(call.operation, event, start);
    otel.storeSeconds.record(call.ms / 1000, {
      ...base,
      ...this.#source?.attributes,
      'idempotency.store.operation': call.operation,
      ...error,
    });
  }

  /** The batch settled: each message's outcome goes to its span, the metrics and `onOutcome`. */
  close(results: readonly ProcessResult[]): void {
    if (this.#ended) return;
    this.#ended = true;
    const durationMs = performance.now() - this.#start;
    const { otel, onOutcome } = this.#owner;
    for (let i = 0; i < results.length; i++) {
      const result = results[i] as ProcessResult;
      if (this.#source?.declined?.(i)) {
        this.#spans?.[i]?.setAttribute('idempotency.declined', true);
        this.#spans?.[i]?.end();
        continue;
      }
      if (otel !== undefined) this.#report(otel, i, result, durationMs);
      if (onOutcome === undefined) continue;
      const event: OutcomeEvent = {
        id: result.id,
        outcome: result.outcome,
        result,
        place: this.#options.placeOf?.(i),
        durationMs,
        handlerMs: this.#handlerMs[i],
        storeMs: this.#storeMs,
      };
      try {
        onOutcome(event);
      } catch (error) {
        // The message is settled: a failing hook must not turn it into a failure of the call.
        this.#owner.warn(`onOutcome threw: ${String(error)}`, 'IDEM_ON_OUTCOME_FAILED');
      }
    }
  }

  /** Message `i`'s span ends with its outcome; the counter and the duration histogram take it. */
  #report(otel: Otel, i: number, result: ProcessResult, durationMs: number): void {
    const failed = result.outcome === 'failed' || result.outcome === 'conflict';
    const errorType = failed ? typeOf(result.error) : undefined;
    const attributes = {
      ...this.#owner.base,
      ...this.#source?.attributes,
      'idempotency.outcome': result.outcome,
      ...(errorType === undefined ? undefined : { 'error.type': errorType }),
    };
    otel.messages.add(1, attributes);
    otel.processSeconds.record(durationMs / 1000, attributes);
    const span = this.#spans?.[i];
    if (span === undefined) return;
    span.setAttribute('idempotency.outcome', result.outcome);
    for (const [flag, name] of FLAGS) if (result[flag] === true) span.setAttribute(name, true);
    if (failed) this.#fail(otel, span, errorType as string, result.error);
    span.end();
  }

  /** A span's error: its type always; its message only under `recordIds` (it may quote an id or a payload). */
  #fail(otel: Otel, span: OtelSpan, errorType: string, error: unknown): void {
    span.setAttribute('error.type', errorType);
    const { ERROR } = otel.api.SpanStatusCode;
    if (!otel.recordIds) {
      span.setStatus({ code: ERROR });
      return;
    }
    span.setStatus({ code: ERROR, message: errorMessage(error) });
    if (error instanceof Error || typeof error === 'string') span.recordException(error);
  }

  /** The call rejected (`storeFailure: 'fail'`): every span ends as failed, unreported. */
  abort(error: unknown): void {
    if (this.#ended) return;
    this.#ended = true;
    const { otel } = this.#owner;
    if (otel === undefined) return;
    for (const span of this.#spans as OtelSpan[]) {
      this.#fail(otel, span, typeOf(error), error);
      span.end();
    }
  }
}

/** The result flags a span carries when set, and their attribute names. */
const FLAGS = [
  ['replayed', 'idempotency.replayed'],
  ['failOpen', 'idempotency.fail_open'],
  ['claimLost', 'idempotency.claim_lost'],
  ['raced', 'idempotency.raced'],
] as const;

/** `error.type`: the error's class name, or `_OTHER` for a thrown value that is not an Error. */
function typeOf(error: unknown): string {
  return error instanceof Error ? error.constructor.name || error.name : '_OTHER';
}

/** The store's type as spans name it: `RedisRepository` → `redis`; a plain object repository → `custom`. */
function storeType(repository: IdempotentRepository): string {
  const name = (repository as { constructor?: { name?: string } }).constructor?.name;
  if (!name || name === 'Object') return 'custom';
  return name.replace(/Repository$/, '').toLowerCase() || 'custom';
}

/** Reads trace headers as text: Kafka header values come as bytes (or lists of them), HTTP ones as text or lists. */
const carrierGetter: OtelGetter<TraceCarrier> = {
  keys: (carrier) => (typeof carrier === 'function' ? [] : Object.keys(carrier)),
  get: (carrier, key) => text(typeof carrier === 'function' ? carrier(key) : carrier[key]),
};

function text(value: unknown): string | string[] | undefined {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return Buffer.from(value.buffer, value.byteOffset, value.length).toString();
  if (Array.isArray(value)) return value.map(text).filter((v): v is string => typeof v === 'string');
  return undefined;
}
