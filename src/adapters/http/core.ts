import type { ServerResponse } from 'node:http';
import { IdempotentConsumer } from '../../consumer/idempotent-consumer.js';
import { InProgressError, RepositoryClosedError, RepositoryError } from '../../errors.js';
import { type CapturedResponse, ResponseCapture } from './capture.js';
import { decodeResponse, encodeResponse } from './codec.js';
import { requestFingerprint } from './fingerprint.js';
import { readIdempotencyKey, scopedId } from './key.js';
import {
  type HttpIdempotencyOptions,
  type HttpRequestView,
  type ResolvedHttpIdempotencyOptions,
  resolveHttpIdempotencyOptions,
} from './options.js';
import { type HttpAnswer, problemAnswer } from './problem.js';

/** The message the consumer sees for one request: its scoped key and what the fingerprint covers. */
export interface HttpMessage {
  /** The store id: route scope, principal and the client's key (see {@link scopedId}). */
  readonly key: string;
  readonly method: string;
  readonly target: string;
  readonly body: unknown;
}

/** What the framework glue does with a request: let it through to the route, or write the adapter's answer. */
export type HttpVerdict =
  | { readonly kind: 'next' }
  | { readonly kind: 'answer'; readonly answer: HttpAnswer };

const NEXT: HttpVerdict = Object.freeze({ kind: 'next' });

/**
 * The route's response said "give the key back" (a 5xx by default): thrown from the consumer's handler so the
 * engine releases the claim instead of keeping the response. Never leaves the adapter.
 */
class ReleasedResponse extends Error {
  constructor(readonly status: number) {
    super(`released after status ${status}`);
  }
}

/**
 * The framework-neutral part of the `Idempotency-Key` adapter. Every decision goes through one
 * {@link IdempotentConsumer} (the library's engine): the key is claimed before the route runs, the route's
 * response is the handler's result (kept with the record by `storeResult`), and the request fingerprint is the
 * consumer's `fingerprint`, so a key reused with another request is a `conflict`.
 */
export class HttpIdempotency<Req> {
  readonly options: ResolvedHttpIdempotencyOptions<Req>;
  /** The consumer every request goes through; its `stats` count processed, replayed, conflicting requests. */
  readonly consumer: IdempotentConsumer<HttpMessage>;

  constructor(options: HttpIdempotencyOptions<Req>) {
    this.options = resolveHttpIdempotencyOptions(options);
    const { repository, ttlMs, leaseMs, maxResponseBytes } = this.options;
    this.consumer = new IdempotentConsumer<HttpMessage>({
      repository,
      id: 'key',
      mode: 'eager',
      ttlMs,
      leaseMs,
      inProgress: 'error',
      removeOnFailure: true,
      storeResult: {
        ...(maxResponseBytes === undefined ? {} : { maxBytes: maxResponseBytes }),
        serialize: (value: unknown) => encodeResponse(value as CapturedResponse),
        deserialize: decodeResponse,
      },
      fingerprint: requestFingerprint,
      onConflict: 'report',
    });
  }

  /**
   * Decides a request. For a new key the route may run: its response is held back (on `res`) until it is
   * stored, then sent. A replay, a conflict or a refused header is answered here instead.
   */
  async begin(view: HttpRequestView<Req>, res: ServerResponse): Promise<HttpVerdict> {
    const { options } = this;
    if (!options.methods.has(view.method)) return NEXT;
    const reading = readIdempotencyKey(view.header(options.header), options.maxKeyLength);
    if (reading.kind === 'absent') {
      if (!options.required) return NEXT;
      return answer(
        'key-missing',
        `${view.method} ${view.route} requires an Idempotency-Key header, e.g. Idempotency-Key: "<a UUID>"`,
      );
    }
    if (reading.kind === 'invalid') return answer('key-invalid', reading.detail);
    if (view.body === undefined && view.hasBody) {
      return answer(
        'body-not-parsed',
        'the request has a body but no body parser ran before the idempotency-key adapter, so its ' +
          'fingerprint cannot cover it: mount a body parser (e.g. express.json()) first',
      );
    }
    const principal = options.scope ? await options.scope(view.request) : undefined;
    const message: HttpMessage = {
      key: scopedId(view.method, view.route, principal, reading.key),
      method: view.method,
      target: view.target,
      body: view.body,
    };
    return this.#claim(message, view.request, res);
  }

  /** Claims the key through the consumer; the route runs inside the consumer's handler. */
  async #claim(message: HttpMessage, request: Req, res: ServerResponse): Promise<HttpVerdict> {
    const capture = new ResponseCapture(res);
    let routeMayRun!: () => void;
    const handlerCalled = new Promise<{ readonly run: true }>((resolve) => {
      routeMayRun = () => resolve({ run: true });
    });
    const processing = this.consumer.process(message, async () => {
      routeMayRun();
      await capture.ended;
      const response = capture.snapshot(this.options.keptHeaders);
      if (this.options.releaseOn(response.status)) throw new ReleasedResponse(response.status);
      return response;
    });
    const first = await Promise.race([
      handlerCalled,
      processing.then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      ),
    ]);
    if ('run' in first) {
      // The route runs; its response goes out once the consumer kept (or released) it.
      processing.then(
        () => capture.flush(),
        (error: unknown) => {
          capture.flush();
          if (!(error instanceof ReleasedResponse)) this.options.onError(error, request);
        },
      );
      return NEXT;
    }
    capture.restore();
    if ('error' in first) return this.#refusal(first.error);
    const { result } = first;
    if (result.outcome === 'conflict') {
      return answer(
        'key-reused',
        'this Idempotency-Key was already used with a different request (method, path or body); ' +
          'send a new key for a new request',
      );
    }
    if (result.outcome === 'duplicate' && result.replayed) {
      const stored = result.result as CapturedResponse;
      return {
        kind: 'answer',
        answer: {
          status: stored.status,
          headers: { ...stored.headers, [this.options.replayedHeader]: 'true' },
          body: stored.body,
        },
      };
    }
    return answer(
      'response-not-kept',
      'a request with this Idempotency-Key was already processed, but its response was not kept (larger than ' +
        'the size cap), so it cannot be replayed; send a new key only if a second request is intended',
    );
  }

  /** The consumer refused before the route ran: another request holds the key, or the store failed. */
  #refusal(error: unknown): HttpVerdict {
    if (error instanceof InProgressError) {
      const waitMs = error.leaseExpiresAt === undefined ? 1_000 : error.leaseExpiresAt - Date.now();
      return answer(
        'in-progress',
        'a request with this Idempotency-Key is still being processed; retry after it completes',
        { 'retry-after': String(Math.max(1, Math.ceil(waitMs / 1_000))) },
      );
    }
    if (error instanceof RepositoryError || error instanceof RepositoryClosedError) {
      return answer('store-unavailable', 'the idempotency store did not answer; retry later', {
        'retry-after': '1',
      });
    }
    throw error;
  }
}

function answer(kind: Parameters<typeof problemAnswer>[0], detail: string, headers?: Record<string, string>) {
  return { kind: 'answer', answer: problemAnswer(kind, detail, headers) } as const;
}
