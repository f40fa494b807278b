import { z } from 'zod';
import { OutcomeCipher, type OutcomeEncryptionOptions } from '../../consumer/encryption.js';
import { consumerDefaults, encryptionSchema, telemetrySchema } from '../../consumer/options.js';
import type { TelemetryOptions } from '../../consumer/telemetry/api.js';
import type { OutcomeEvent } from '../../consumer/types.js';
import { type OptionsOrigin, parseOptions } from '../../options/issues.js';
import { MAX_TTL_MS } from '../../store/ttl.js';
import type { IdempotentRepository } from '../../store/types.js';
import type { CapturedResponse } from './capture.js';
import { credentialScope } from './key.js';

/** Defaults of the HTTP adapter (see {@link HttpIdempotencyOptions}), written once. */
export const httpIdempotencyDefaults = {
  header: 'Idempotency-Key',
  replayedHeader: 'Idempotent-Replayed',
  required: true,
  /** The methods the draft calls non-idempotent. */
  methods: ['POST', 'PATCH'] as readonly string[],
  /** The draft sets no limit; 255 fits a UUID with room to spare. */
  maxKeyLength: 255,
  ttlMs: consumerDefaults.ttlMs,
  leaseMs: consumerDefaults.leaseMs,
  /** Not the lease: a renewed lease always has most of its length left, too long a wait for a quick route. */
  retryAfterMs: 1_000,
  /** Besides those in `replayHeaders`. */
  keptHeaders: ['content-type', 'content-language', 'content-location', 'location'] as readonly string[],
  /** Request headers that carry credentials; their digest is the principal when no `scope` hook is set. */
  credentialHeaders: ['authorization', 'proxy-authorization', 'cookie', 'x-api-key'] as readonly string[],
  /** A 5xx gives the key back, so a retry runs again. */
  storeIf: (response: { readonly status: number }): boolean => response.status < 500,
} as const;

/** The framework-neutral view of a request the adapter needs. */
export interface HttpRequestView<Req> {
  /** The framework's own request, handed to the `scope` hook. */
  readonly request: Req;
  readonly method: string;
  /** The route pattern when the framework knows it (`/charges/:id`), else the path. */
  readonly route: string;
  /** Path and query as sent; part of the fingerprint. */
  readonly target: string;
  /** The parsed (or raw) body; undefined when no body parser ran. */
  readonly body: unknown;
  /** True when the request carries a body (Content-Length above 0, or Transfer-Encoding). */
  readonly hasBody: boolean;
  readonly header: (name: string) => string | string[] | undefined;
}

/** Options of the HTTP `Idempotency-Key` adapter (`idempotencyKey(...)` for Express, the Fastify plugin). */
export interface HttpIdempotencyOptions<Req = unknown> {
  /** The store that keeps keys and responses (memory, RocksDB, Redis, …). */
  readonly repository: IdempotentRepository;
  /** How long a key's response is replayed, in ms (default 24 h); publish it to your clients. */
  readonly ttlMs?: number;
  /** How long a request in flight holds its key without renewal, in ms (default 60 s); renewed every third while the route runs. */
  readonly leaseMs?: number;
  /**
   * How long a client should wait before retrying a key that is still in flight: the `Retry-After` of a 409
   * in-progress, in ms, rounded up to whole seconds (at least 1 s), and never more than the claim's remaining
   * lease (default 1 s). Set it near your route's usual duration.
   */
  readonly retryAfterMs?: number;
  /** Refuse a request without the header with 400 (default). False: such a request runs without dedup. */
  readonly required?: boolean;
  /** Methods the adapter acts on (default POST and PATCH); others pass through. */
  readonly methods?: readonly string[];
  /** The header's name (default `Idempotency-Key`). */
  readonly header?: string;
  /** The header that marks a replay with `true` (default `Idempotent-Replayed`). */
  readonly replayedHeader?: string;
  /** Longest key accepted, in characters (default 255). */
  readonly maxKeyLength?: number;
  /** More response headers to keep and replay, besides Content-Type, Content-Language, Content-Location, Location. */
  readonly replayHeaders?: readonly string[];
  /**
   * Which responses are kept and replayed; a response it refuses gives the key back, so a retry runs the route
   * again. Default: every status below 500 (`(r) => r.status < 500`: a 4xx is replayed, a 5xx retried). Keep
   * only successes, as Checkout.com and PPRO do: `(r) => r.status < 300`; keep errors too, as Stripe does:
   * `() => true`.
   */
  readonly storeIf?: (response: CapturedResponse) => boolean;
  /** @deprecated Use `storeIf`: `releaseOn: f` is `storeIf: (r) => !f(r.status)`. */
  readonly releaseOn?: (status: number) => boolean;
  /**
   * Scopes keys to a principal (user, API client, tenant); undefined for an anonymous request. Scope by the
   * user, not the token: a retry after a token refresh or a cookie change must find its key. `'credentials'`
   * scopes by a SHA-256 digest of the `credentialHeaders` (never replayed to other credentials, but a retry
   * whose credentials changed runs again); unset, the same, with a warning once per process
   * (`IDEM_HTTP_CREDENTIAL_SCOPE`). Keys are always scoped per route too. See docs/http.md, "Scope".
   */
  readonly scope?: ((request: Req) => string | undefined | Promise<string | undefined>) | 'credentials';
  /**
   * Request headers whose values, digested, scope keys under `scope: 'credentials'` or without `scope` (default
   * Authorization, Proxy-Authorization, Cookie, X-Api-Key). The values are never stored, only their SHA-256.
   */
  readonly credentialHeaders?: readonly string[];
  /** Largest stored response, in bytes of its stored form; a larger one is sent but not kept (store default). */
  readonly maxResponseBytes?: number;
  /**
   * Encrypts stored responses with AES-256-GCM, with key ids for rotation (the consumer's `encryption`). A
   * stored response that cannot be decrypted is never replayed: the retry gets a 500 problem
   * (`response-unreadable`) and the route does not run again.
   */
  readonly encryption?: OutcomeEncryptionOptions;
  /**
   * Told about a store failure after the route ran (its response is still sent; the key frees itself at the
   * lease end), and about a lost claim: a ClaimLostError when the lease ran out before the route answered and
   * another request took the key over, so the route may have run twice. Default: a process warning.
   */
  readonly onError?: (error: unknown, request: Req) => void;
  /**
   * OpenTelemetry (the consumer's `telemetry`): a span per request with a key, the child of the active server
   * span or else of the request's `traceparent`, and the consumer's metrics. See docs/telemetry.md.
   */
  readonly telemetry?: TelemetryOptions;
  /** Told each request's outcome and durations once its key is settled (the consumer's `onOutcome`). */
  readonly onOutcome?: (event: OutcomeEvent) => void;
}

/** Options with every default applied. */
export interface ResolvedHttpIdempotencyOptions<Req> {
  readonly repository: IdempotentRepository;
  readonly ttlMs: number;
  readonly leaseMs: number;
  readonly retryAfterMs: number;
  readonly required: boolean;
  readonly methods: ReadonlySet<string>;
  readonly header: string;
  readonly replayedHeader: string;
  readonly maxKeyLength: number;
  /** Lower-case names of the headers kept with a response. */
  readonly keptHeaders: ReadonlySet<string>;
  readonly storeIf: (response: CapturedResponse) => boolean;
  /** The principal of a request: the `scope` hook's answer, else the digest of its credential headers. */
  readonly principal: (view: HttpRequestView<Req>) => string | undefined | Promise<string | undefined>;
  readonly maxResponseBytes: number | undefined;
  readonly encryption: OutcomeEncryptionOptions | undefined;
  readonly onError: (error: unknown, request: Req) => void;
  readonly telemetry: TelemetryOptions | undefined;
  readonly onOutcome: ((event: OutcomeEvent) => void) | undefined;
}

const fn = z.custom<unknown>((value) => typeof value === 'function', { error: 'must be a function' });
const positiveMs = z
  .number()
  .positive({ error: 'must be greater than 0' })
  .max(MAX_TTL_MS, { error: `must be at most ${MAX_TTL_MS} ms (100 years)` });
// An HTTP field name (RFC 9110 token).
const fieldName = z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, { error: 'must be an HTTP header name' });

const schema = z
  .object({
    repository: z.custom<IdempotentRepository>(
      (value) => typeof (value as IdempotentRepository | undefined)?.addMany === 'function',
      { error: (issue) => (issue.input === undefined ? 'is required' : 'must be a repository') },
    ),
    ttlMs: positiveMs.optional(),
    leaseMs: positiveMs.optional(),
    retryAfterMs: positiveMs.optional(),
    required: z.boolean().optional(),
    methods: z.array(z.string().regex(/^[A-Za-z]+$/, { error: 'must be an HTTP method' })).optional(),
    header: fieldName.optional(),
    replayedHeader: fieldName.optional(),
    maxKeyLength: z.number().int().min(1).max(1000).optional(),
    replayHeaders: z.array(fieldName).optional(),
    storeIf: fn.optional(),
    releaseOn: fn.optional(),
    scope: z
      .custom<unknown>((value) => typeof value === 'function' || value === 'credentials', {
        error: "must be a function (request) => principal, or 'credentials'",
      })
      .optional(),
    credentialHeaders: z.array(fieldName).optional(),
    maxResponseBytes: z.number().int().positive().optional(),
    encryption: encryptionSchema.optional(),
    onError: fn.optional(),
    telemetry: telemetrySchema.optional(),
    onOutcome: fn.optional(),
  })
  .strict()
  .refine((options) => options.storeIf === undefined || options.releaseOn === undefined, {
    path: ['releaseOn'],
    error: 'cannot be given with storeIf (releaseOn is its older, inverted form)',
  });

const ORIGIN: OptionsOrigin = { kind: 'code', owner: 'idempotencyKey(...)' };

/** Validates the options (each problem a ConfigError naming the option) and applies the defaults. */
export function resolveHttpIdempotencyOptions<Req>(
  options: HttpIdempotencyOptions<Req>,
): ResolvedHttpIdempotencyOptions<Req> {
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  parseOptions(schema, given, ORIGIN);
  // The keys are checked here, so a bad one names this adapter rather than its consumer.
  if (options.encryption !== undefined) new OutcomeCipher(options.encryption, 'idempotencyKey(...)');
  const d = httpIdempotencyDefaults;
  const { scope, releaseOn } = options;
  const kept = [...d.keptHeaders, ...(options.replayHeaders ?? [])].map((h) => h.toLowerCase());
  const credentials = (options.credentialHeaders ?? d.credentialHeaders).map((h) => h.toLowerCase());
  return {
    repository: options.repository,
    ttlMs: options.ttlMs ?? d.ttlMs,
    leaseMs: options.leaseMs ?? d.leaseMs,
    retryAfterMs: options.retryAfterMs ?? d.retryAfterMs,
    required: options.required ?? d.required,
    methods: new Set((options.methods ?? d.methods).map((m) => m.toUpperCase())),
    header: (options.header ?? d.header).toLowerCase(),
    replayedHeader: options.replayedHeader ?? d.replayedHeader,
    maxKeyLength: options.maxKeyLength ?? d.maxKeyLength,
    keptHeaders: new Set(kept),
    storeIf: options.storeIf ?? (releaseOn ? (response) => !releaseOn(response.status) : d.storeIf),
    principal:
      typeof scope === 'function'
        ? (view) => scope(view.request)
        : (view) => credentialScope(view, credentials),
    maxResponseBytes: options.maxResponseBytes,
    encryption: options.encryption,
    onError:
      options.onError ??
      ((error) => process.emitWarning(`idempotency-key adapter: ${String(error)}`, 'IdempotencyKeyWarning')),
    telemetry: options.telemetry,
    onOutcome: options.onOutcome,
  };
}
