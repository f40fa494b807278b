import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import { preDigested } from '../../consumer/fingerprint.js';
import { IdempotentConsumer } from '../../consumer/idempotent-consumer.js';
import { isThenable } from '../../consumer/rule.js';
import type { BatchOptions, ProcessResult } from '../../consumer/types.js';
import {
  ClaimLostError,
  InProgressError,
  InvalidIdError,
  RepositoryClosedError,
  RepositoryError,
  StoredOutcomeError,
} from '../../errors.js';
import { type CapturedResponse, ResponseCapture } from './capture.js';
import { decodeResponse, encodeResponse } from './codec.js';
import { type RequestParts, requestFingerprint } from './fingerprint.js';
import { readIdempotencyKey, scopedId } from './key.js';
import {
  type HttpIdempotencyOptions,
  type HttpRequestView,
  type ResolvedHttpIdempotencyOptions,
  resolveHttpIdempotencyOptions,
} from './options.js';
import { type HttpAnswer, problemAnswer } from './problem.js';

/** The message the consumer sees for one request: its scoped key and what the fingerprint covers. */
export interface HttpMessage extends RequestParts {
  /** The store id: route scope, principal and the client's key (see {@link scopedId}). */
  readonly key: string;
}

/** What the framework glue does with a request: let it through to the route, or write the adapter's answer. */
export type HttpVerdict =
  | { readonly kind: 'next' }
  | { readonly kind: 'answer'; readonly answer: HttpAnswer };

const NEXT: HttpVerdict = Object.freeze({ kind: 'next' });

/** Thrown from the consumer's handler for a response not to keep (a 5xx by default): the claim is released. */
class ReleasedResponse extends Error {}

const warned = new Set<string>();

function warnOnce(code: string, message: string): void {
  if (warned.has(code)) return;
  warned.add(code);
  process.emitWarning(message, { type: 'IdempotencyKeyWarning', code });
}

/** Warns when a process-local store backs the adapter in production (the warning says why). */
function warnProcessLocalStore({ capabilities }: HttpIdempotencyOptions<unknown>['repository']): void {
  if (process.env.NODE_ENV !== 'production') return;
  if (capabilities?.shared !== false || capabilities.persistent !== false) return;
  warnOnce(
    'IDEM_HTTP_PROCESS_LOCAL_STORE',
    'the Idempotency-Key adapter runs on a store that holds keys in this process only (the memory store): ' +
      'a retry that reaches another instance, or this one after a restart, runs the route again. Use a ' +
      'shared store (Redis, DynamoDB, Cassandra) in production.',
  );
}

/** Warns when an adapter is built without a `scope` choice (the warning says why). */
function warnImplicitScope(scope: unknown): void {
  if (scope !== undefined) return;
  warnOnce(
    'IDEM_HTTP_CREDENTIAL_SCOPE',
    "the Idempotency-Key adapter has no scope option, so it scopes keys by a digest of the request's " +
      'credentials (Authorization, Cookie, ...): a retry sent after an access-token refresh or a cookie change ' +
      'runs the route again. Set scope to the signed-in user (scope: (req) => req.user?.id), or choose the ' +
      "digest explicitly with scope: 'credentials'.",
  );
}

/** The parts of a framework's request that {@link RequestView} reads. */
interface NodeRequestLike {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly body?: unknown;
}

/** What the adapter reads of a request; a class so `header` is one shared method, not a closure per request. */
export class RequestView<Req extends NodeRequestLike> implements HttpRequestView<Req> {
  readonly method: string;
  readonly body: unknown;
  readonly hasBody: boolean;

  constructor(
    readonly request: Req,
    readonly route: string,
    readonly target: string,
  ) {
    this.method = request.method;
    this.body = request.body;
    // By the framing headers (RFC 9112 §6.3).
    const length = request.headers['content-length'];
    this.hasBody =
      request.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
  }

  header(name: string): string | string[] | undefined {
    return this.request.headers[name];
  }
}

/**
 * The framework-neutral `Idempotency-Key` adapter over one {@link IdempotentConsumer}: the route runs as its
 * handler, the response is the kept result, and the request fingerprint makes a reused key a `conflict`.
 */
export class HttpIdempotency<Req> {
  readonly options: ResolvedHttpIdempotencyOptions<Req>;
  /** The consumer every request goes through; its `stats` count processed, replayed, conflicting requests. */
  readonly consumer: IdempotentConsumer<HttpMessage>;

  constructor(options: HttpIdempotencyOptions<Req>) {
    this.options = resolveHttpIdempotencyOptions(options);
    warnImplicitScope(options.scope);
    const { repository, ttlMs, leaseMs, maxResponseBytes, encryption, telemetry, onOutcome } = this.options;
    warnProcessLocalStore(repository);
    this.consumer = new IdempotentConsumer<HttpMessage>({
      repository,
      id: 'key',
      mode: 'eager',
      ttlMs,
      leaseMs,
      inProgress: 'error',
      removeOnFailure: true,
      storeResult: {
        maxBytes: maxResponseBytes,
        serialize: (value: unknown) => encodeResponse(value as CapturedResponse),
        deserialize: decodeResponse,
      },
      // Already a SHA-256: kept as it is, not digested again (records of earlier versions still match).
      fingerprint: preDigested(requestFingerprint),
      onConflict: 'report',
      // The route never gets the SQL stores' transaction: holding one open would only tie up a pool connection
      // per route in flight and keep a hung route's key for as long as it hangs.
      transaction: false,
      // The consumer drops options left undefined.
      encryption,
      telemetry,
      onOutcome,
    });
  }

  /** Decides a request: a new key lets the route run (its response held back until stored), else an answer. */
  begin(view: HttpRequestView<Req>, res: ServerResponse): Promise<HttpVerdict> {
    return new Promise((resolve, reject) => this.decide(view, res, resolve, reject));
  }

  /**
   * {@link begin} with callbacks: `verdict` once, or `fail` with an unexpected error. A verdict known at once is
   * given before `decide` returns, so the Express glue runs the route in the same tick.
   */
  decide(
    view: HttpRequestView<Req>,
    res: ServerResponse,
    verdict: (verdict: HttpVerdict) => void,
    fail: (error: unknown) => void,
  ): void {
    let key: string | HttpVerdict;
    let principal: string | undefined | Promise<string | undefined>;
    try {
      key = this.#keyOf(view);
      if (typeof key === 'string') principal = this.options.principal(view);
    } catch (error) {
      fail(error);
      return;
    }
    // What the glue does with a verdict is not the adapter's failure: called outside the try.
    if (typeof key !== 'string') verdict(key);
    // A `scope` hook that answers at once costs no promise hop.
    else if (isThenable(principal)) {
      const found = key;
      Promise.resolve(principal).then((p) => this.#claim(view, p, found, res, verdict, fail), fail);
    } else this.#claim(view, principal, key, res, verdict, fail);
  }

  /** The request's key, or the verdict of a request let through or refused without a claim. */
  #keyOf(view: HttpRequestView<Req>): string | HttpVerdict {
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
    return reading.key;
  }

  /** Claims the key; the route runs inside the consumer's handler (verdict `next`), else the answer decides. */
  #claim(
    view: HttpRequestView<Req>,
    principal: string | undefined,
    key: string,
    res: ServerResponse,
    verdict: (verdict: HttpVerdict) => void,
    fail: (error: unknown) => void,
  ): void {
    let message: HttpMessage;
    try {
      const maxIdBytes = this.options.repository.capabilities?.maxIdBytes;
      const id = scopedId(view.method, view.route, principal, key, maxIdBytes);
      message = { key: id, method: view.method, target: view.target, body: view.body };
    } catch (error) {
      fail(error);
      return;
    }
    // Made only once the route may run: a replay, a conflict or a refusal never touches the response's methods.
    let capture: ResponseCapture | undefined;
    const { options } = this;
    // The lease belongs to the route's work, not the connection: renewed while the route runs even if its client
    // left, so a retry meanwhile gets 409, not a second run.
    this.consumer
      .process(
        message,
        (): CapturedResponse | Promise<CapturedResponse> => {
          const routeCapture = new ResponseCapture(res);
          capture = routeCapture;
          // The route runs now (on Express, before this returns): whatever it throws out of the framework
          // fails this handler, so the claim is given back.
          verdict(NEXT);
          // A route that answered at once is kept at once: no promise between its end and the store's confirm.
          if (routeCapture.finished) return this.#kept(routeCapture);
          return routeCapture.ended.then(() => this.#kept(routeCapture));
        },
        this.#traceOptions(view),
      )
      .then(
        (result) => {
          if (capture === undefined) {
            verdict(this.#answer(result));
            return;
          }
          // The route ran; its response goes out now that the consumer kept (or released) it.
          capture.flush();
          // The lease ran out before the route answered and another request took the key over, so the route
          // may have run twice (a store that cannot renew, a blocked event loop): the operator must hear of it.
          if (result.claimLost) options.onError(new ClaimLostError(message.key), view.request);
        },
        (error: unknown) => {
          if (capture === undefined) {
            const refusal = this.#refusal(error);
            if (refusal) verdict(refusal);
            else fail(error);
            return;
          }
          capture.flush();
          if (!(error instanceof ReleasedResponse)) options.onError(error, view.request);
        },
      );
  }

  /** What the route wrote, to keep with its key; throws ReleasedResponse for a response not to keep. */
  #kept(capture: ResponseCapture): CapturedResponse {
    const { options } = this;
    const response = capture.snapshot(options.keptHeaders);
    // A route that failed after it started writing (or wrote a body its framing disagrees with) sent no whole
    // response: its key is given back, never kept with the bytes it got to write.
    if (response === undefined) throw new ReleasedResponse('the route failed mid-response');
    if (!options.storeIf(response)) throw new ReleasedResponse(`not kept: status ${response.status}`);
    return response;
  }

  /** The consumer answered without running the route: a conflict, a replay, or a response not kept. */
  #answer(result: ProcessResult<unknown>): HttpVerdict {
    if (result.outcome === 'conflict') {
      return answer(
        'key-reused',
        'this Idempotency-Key was already used with a different request (method, path or body); ' +
          'send a new key for a new request',
      );
    }
    if (result.outcome === 'duplicate' && result.replayed) {
      const { status, headers, body } = result.result as CapturedResponse;
      const replayed = { ...headers, [this.options.replayedHeader]: 'true' };
      return { kind: 'answer', answer: { status, headers: replayed, body } };
    }
    return answer(
      'response-not-kept',
      'a request with this Idempotency-Key was already processed, but its response was not kept (larger than ' +
        'the size cap), so it cannot be replayed; send a new key only if a second request is intended',
    );
  }

  /** A 409's `Retry-After`: `retryAfterMs`, capped by the lease end (or a lease from now), in seconds, ≥ 1. */
  #retryAfterSeconds(leaseExpiresAt: number | undefined): number {
    const { retryAfterMs, leaseMs } = this.options;
    const remainingMs = leaseExpiresAt === undefined ? leaseMs : leaseExpiresAt - Date.now();
    return Math.max(1, Math.ceil(Math.min(retryAfterMs, remainingMs) / 1_000));
  }

  /** The request's trace context and method for the consumer's telemetry (no options without telemetry). */
  #traceOptions(view: HttpRequestView<Req>): BatchOptions | undefined {
    if (this.options.telemetry === undefined && this.options.onOutcome === undefined) return undefined;
    const header = (name: string) => view.header(name);
    return { trace: { headersOf: () => header, attributes: { 'http.request.method': view.method } } };
  }

  /** The consumer refused before the route ran (key held, store failed); undefined for an unexpected error. */
  #refusal(error: unknown): HttpVerdict | undefined {
    if (error instanceof StoredOutcomeError) {
      return answer(
        'response-unreadable',
        'a request with this Idempotency-Key was already processed, but its stored response cannot be decrypted ' +
          'with the configured keys, so it is not replayed; the server operator must restore the key',
      );
    }
    if (error instanceof InvalidIdError) {
      return answer('key-invalid', `the Idempotency-Key cannot be stored: ${error.message}`);
    }
    if (error instanceof InProgressError) {
      return answer(
        'in-progress',
        'a request with this Idempotency-Key is still being processed; retry after it completes',
        { 'retry-after': String(this.#retryAfterSeconds(error.leaseExpiresAt)) },
      );
    }
    if (error instanceof RepositoryError || error instanceof RepositoryClosedError) {
      return answer('store-unavailable', 'the idempotency store did not answer; retry later', {
        'retry-after': '1',
      });
    }
    return undefined;
  }
}

function answer(kind: Parameters<typeof problemAnswer>[0], detail: string, headers?: Record<string, string>) {
  return { kind: 'answer', answer: problemAnswer(kind, detail, headers) } as const;
}
