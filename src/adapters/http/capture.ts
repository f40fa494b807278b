import { type OutgoingHttpHeaders, ServerResponse } from 'node:http';

/** A route's response as the adapter keeps it: status, the chosen headers, and the body bytes. */
export interface CapturedResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer;
}

type Callback = (error?: Error | null) => void;

const HEADER_SETTERS = ['setHeader', 'removeHeader', 'appendHeader'] as const;
/** The response methods a capture replaces while the route runs. */
const REPLACED = ['writeHead', 'writeHeader', 'write', 'end', 'flushHeaders', ...HEADER_SETTERS] as const;
type ReplacedMethod = (typeof REPLACED)[number];

/** The slot of a captured response that holds its capture. */
const CAPTURE = Symbol('idempotency-key response capture');
/** A captured response; `writeHeader` is Node's alias of `writeHead` (the same function), untyped by @types/node. */
type Captured = ServerResponse & { [CAPTURE]?: ResponseCapture; writeHeader?: ServerResponse['writeHead'] };

function captureOf(res: Captured): ResponseCapture {
  return res[CAPTURE] as ResponseCapture;
}

const TAKEN: readonly string[] = [...REPLACED, 'headersSent', 'writableEnded'];

/** True when `target` has a property of its own that a capture takes over (a method or a state getter). */
function ownsTaken(target: object): boolean {
  // A loop, not `some` with a closure: this runs once per captured response.
  for (const name of TAKEN) if (Object.hasOwn(target, name)) return true;
  return false;
}

type Method = (this: Captured, ...args: unknown[]) => unknown;
type Methods = Record<ReplacedMethod, Method>;

/** What a capture installs: its functions, and the property descriptors that put them (and the getters) in place. */
interface Takeover {
  readonly methods: Methods;
  readonly descriptors: PropertyDescriptorMap;
}

/** The capture's functions for the prototypes above one shared base (see `#patchFor`), and the base's own. */
interface Patch {
  readonly base: object;
  readonly inherited: Methods;
  readonly descriptors: PropertyDescriptorMap;
}

/** The methods a capture replaces, as `from` has them (its own or inherited). */
function methodsOf(from: object): Methods {
  // A loop, not Object.fromEntries: this runs per response on the own-property path, without entry arrays.
  const methods = {} as Methods;
  for (const name of REPLACED) methods[name] = (from as Captured)[name] as Method;
  return methods;
}

/** How a captured response finished: the route ended it, or the connection closed after it started writing. */
export type CaptureEnd = 'ended' | 'aborted';

/** Node's own error for a header written after the headers went out, so error handlers see what they expect. */
function headersSentError(): Error {
  return Object.assign(new Error('Cannot set headers after they are sent to the client'), {
    code: 'ERR_HTTP_HEADERS_SENT',
  });
}

/** Bodies up to this size are sent as text with the headers (see {@link endWith}). */
const ONE_WRITE_BYTES = 16_384;

/**
 * Ends a response with `body`. Node sends a text body with the headers in one write but a Buffer as a dearer
 * writev, so a small body goes as latin1 text (one character per byte: the same bytes).
 */
export function endWith(res: ServerResponse, body: Buffer, callback?: Callback): void {
  if (body.length > ONE_WRITE_BYTES) res.end(body, callback);
  else res.end(body.toString('latin1'), 'latin1', callback);
}

/**
 * Holds back what a route writes to a Node `ServerResponse` until {@link ResponseCapture.flush}, so it is stored
 * before the client sees it. Express and Fastify both end in `writeHead`/`write`/`end`.
 */
export class ResponseCapture {
  /**
   * The functions put in place of a response's methods and state getters: one table for every capture (no
   * closures per response, which would each get a hidden class) on the response itself, or on the prototypes
   * above `base` ({@link #patchFor}). Each finds its capture in the {@link CAPTURE} slot, else acts as before.
   */
  static #takeover(base?: object): Takeover {
    const shared = base !== undefined;
    const holding = (res: Captured): ResponseCapture | undefined => {
      const capture = res[CAPTURE];
      return capture !== undefined && capture.#shared === shared && !capture.#restored ? capture : undefined;
    };
    // Own properties fall back to the methods the response had; a patch, to its base's.
    const inherited = shared ? methodsOf(base) : undefined;
    // Once the route started or ended its response, it must look sent: Fastify sends again a reply that is
    // not `sent` after an async route that called `reply.send` returns, and Express and Fastify check
    // `headersSent` before writing an error. Once restored, both read through to Node's.
    const state = (name: 'headersSent' | 'writableEnded', held: (capture: ResponseCapture) => boolean) => ({
      configurable: true,
      get(this: Captured): boolean {
        const capture = holding(this);
        return (
          (capture !== undefined && held(capture)) || Reflect.get(base ?? captureOf(this).#proto, name, this)
        );
      },
    });
    const methods = {} as Methods;
    const descriptors: PropertyDescriptorMap = {
      headersSent: state('headersSent', (capture) => capture.#committed || capture.#ended),
      writableEnded: state('writableEnded', (capture) => capture.#ended),
    };
    for (const name of REPLACED) {
      methods[name] = function (this: Captured, ...args: unknown[]): unknown {
        const capture = holding(this);
        if (capture) return capture.#take(name, args);
        return (inherited ?? captureOf(this).#previous)[name].apply(this, args);
      };
      descriptors[name] = { configurable: true, writable: true, value: methods[name] };
    }
    return { methods, descriptors };
  }

  /** Made on first use: in tsc's build a static initializer cannot call `#takeover` ("Receiver must be class"). */
  static #own: Takeover | undefined;

  /** The patches by base; each prototype's patch (null: it takes none); the prototypes that carry one. */
  static readonly #patches = new WeakMap<object, Patch>();
  static readonly #patchOf = new WeakMap<object, Patch | null>();
  static readonly #patched = new WeakSet<object>();

  /**
   * The patch covering a response prototype, made on first use. Own properties on an Express response (whose
   * prototype is its app's `response`) cost a slow map transition each, so the functions go once on every
   * prototype between it and Express's shared base `response`. The base and ServerResponse.prototype are never
   * touched; a raw Node response (Fastify's), or a chain defining one of the methods itself, gets no patch.
   */
  static #patchFor(proto: object): Patch | undefined {
    const known = ResponseCapture.#patchOf.get(proto);
    if (known !== undefined) return known ?? undefined;
    const chain: object[] = [];
    let at: object | null = proto;
    while (at !== null && at !== ServerResponse.prototype) {
      chain.push(at);
      at = Object.getPrototypeOf(at) as object | null;
    }
    const base = chain.pop();
    let patch: Patch | null = null;
    if (
      at !== null &&
      base !== undefined &&
      chain.length > 0 &&
      chain.every((p) => ResponseCapture.#patched.has(p) || (Object.isExtensible(p) && !ownsTaken(p)))
    ) {
      patch = ResponseCapture.#patches.get(base) ?? {
        base,
        inherited: methodsOf(base),
        descriptors: ResponseCapture.#takeover(base).descriptors,
      };
      ResponseCapture.#patches.set(base, patch);
      for (const p of chain) {
        if (ResponseCapture.#patched.has(p)) continue;
        Object.defineProperties(p, patch.descriptors);
        ResponseCapture.#patched.add(p);
      }
    }
    ResponseCapture.#patchOf.set(proto, patch);
    return patch ?? undefined;
  }

  /** Listened to only until the flush (`this` is the response, as EventEmitter calls it). */
  static readonly #onClose = function (this: Captured): void {
    captureOf(this).#closed();
  };

  readonly #res: Captured;
  /** Where Node's own `headersSent` and `writableEnded` are read from (past any patch). */
  readonly #proto: object;
  /** The response goes through a patched prototype, not through properties of its own. */
  readonly #shared: boolean;
  /**
   * The methods the response had before the capture, perhaps an earlier middleware's wrappers (`on-headers`,
   * `compression`): header setters delegate to them and `restore` puts them back, so they see what is sent.
   */
  readonly #previous: Methods;
  readonly #chunks: Buffer[] = [];
  /** The body as one buffer, once the route ended it (made by the first of `snapshot` and `flush` to need it). */
  #body: Buffer | undefined;
  #endCallback: Callback | undefined;
  #ended = false;
  /**
   * The route called `writeHead` or `write`: the headers now look sent and cannot change, so an error handler
   * drops the connection instead of writing a second response under the first one's bytes.
   */
  #committed = false;
  #status: number | undefined;
  /** The close listener is on (see {@link ResponseCapture.#started}). */
  #listening = false;
  #restored = false;
  /** How the response finished, once it did. */
  #end: CaptureEnd | undefined;
  /** Set only when {@link ended} is read before the end (a route that ends its response at once never needs it). */
  #onEnd: (() => void) | undefined;

  constructor(res: ServerResponse) {
    const own = res as Captured;
    this.#res = own;
    const proto = Object.getPrototypeOf(res) as object;
    const patch = ResponseCapture.#patchFor(proto);
    // The response's own methods (an earlier middleware's wrappers) would shadow a patched prototype's.
    if (patch !== undefined && !ownsTaken(res)) {
      this.#shared = true;
      this.#proto = patch.base;
      this.#previous = patch.inherited;
      own[CAPTURE] = this;
      return;
    }
    this.#shared = false;
    this.#proto = proto;
    this.#previous = methodsOf(own);
    // Own properties shadow the prototype's methods; `restore` puts the prototype's back.
    own[CAPTURE] = this;
    ResponseCapture.#own ??= ResponseCapture.#takeover();
    const { methods, descriptors } = ResponseCapture.#own;
    this.#assign(methods);
    Object.defineProperty(res, 'headersSent', descriptors.headersSent as PropertyDescriptor);
    Object.defineProperty(res, 'writableEnded', descriptors.writableEnded as PropertyDescriptor);
  }

  #closed(): void {
    // A client gone before the route started writing changes nothing: the route runs on and its response is
    // kept for the retry. Gone after it started, before it ended: the route failed mid-response.
    if (!this.#ended && this.#committed) this.#finish('aborted');
  }

  /** A replaced method called while this capture holds the response: the route's `res.end` and the like. */
  #take(name: ReplacedMethod, args: unknown[]): unknown {
    switch (name) {
      // Node's alias refers to its own writeHead, not to the response's: replaced too, or it would set the
      // status and headers past the capture.
      case 'writeHead':
      case 'writeHeader':
        return this.writeHead(...(args as Parameters<ResponseCapture['writeHead']>));
      case 'write':
        return this.write(...(args as Parameters<ResponseCapture['write']>));
      case 'end':
        return this.end(...(args as Parameters<ResponseCapture['end']>));
      case 'flushHeaders':
        return undefined;
      default:
        // A header setter: refused once the route committed its headers, else the response's own.
        if (this.#committed) throw headersSentError();
        return this.#previous[name].apply(this.#res, args);
    }
  }

  /** Resolves (read it once) when the response ended or was aborted; never, if the route hangs before writing. */
  get ended(): Promise<void> {
    if (this.#end !== undefined) return Promise.resolve();
    return new Promise((resolve) => {
      this.#onEnd = resolve;
    });
  }

  #finish(end: CaptureEnd): void {
    if (this.#end !== undefined) return;
    this.#end = end;
    this.#onEnd?.();
  }

  /** True once {@link ended} has resolved or is about to: the route ended its response, or it was aborted. */
  get finished(): boolean {
    return this.#end !== undefined;
  }

  /** The response with the headers named in `keep`; undefined unless ended and framed by its Content-Length. */
  snapshot(keep: ReadonlySet<string>): CapturedResponse | undefined {
    if (this.#end !== 'ended') return undefined;
    const body = this.#wholeBody();
    if (!this.#framed(body.length)) return undefined;
    const res = this.#res;
    const headers: Record<string, string | readonly string[]> = {};
    // Only the kept names are read (a handful), not a copy of every header the route set.
    for (const name of keep) {
      const value = res.getHeader(name);
      if (value === undefined) continue;
      headers[name] = Array.isArray(value) ? value.map(String) : String(value);
    }
    return { status: this.#status ?? res.statusCode, headers, body };
  }

  /** The body the route ended: its one chunk as it is, or the chunks joined (once). */
  #wholeBody(): Buffer {
    if (this.#body === undefined) {
      const chunks = this.#chunks;
      this.#body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
      chunks.length = 0;
    }
    return this.#body;
  }

  /** True when the body length agrees with the response's Content-Length (or it has none). */
  #framed(length: number): boolean {
    const declared = this.#res.getHeader('content-length');
    if (declared === undefined) return true;
    return Number(Array.isArray(declared) ? declared[0] : declared) === length;
  }

  /**
   * Puts back the response's earlier methods. Assigned, not deleted: deleting own properties out of order makes
   * a slow dictionary-mode object. The shadowed getters stay and read through to Node's.
   */
  restore(): void {
    if (this.#restored) return;
    this.#restored = true;
    if (this.#listening) this.#res.off('close', ResponseCapture.#onClose);
    // A patched prototype acts as the base's once the capture is restored: nothing to put back.
    if (this.#shared) return;
    this.#assign(this.#previous);
  }

  #assign(from: Methods): void {
    const own = this.#res as unknown as Methods;
    for (const name of REPLACED) own[name] = from[name];
  }

  /**
   * Sends what the route wrote; later writes go straight through. A response that failed mid-way or disagrees
   * with its Content-Length closes the connection instead, as Node does, so no byte reads as the next response.
   */
  flush(): void {
    this.restore();
    if (!this.#ended && this.#end !== 'aborted') {
      // The route is still writing (the store answered first): hand over what it wrote so far.
      for (const chunk of this.#chunks.splice(0)) this.#res.write(chunk);
      return;
    }
    const body = this.#wholeBody();
    this.#body = undefined;
    if (this.#end === 'aborted' || !this.#framed(body.length)) this.#res.destroy();
    else endWith(this.#res, body, this.#endCallback);
  }

  writeHead(
    status: number,
    reasonOrHeaders?: string | OutgoingHttpHeaders | readonly unknown[],
    maybeHeaders?: OutgoingHttpHeaders | readonly unknown[],
  ): ServerResponse {
    const res = this.#res;
    if (this.#committed) throw headersSentError();
    res.statusCode = status;
    let headers = maybeHeaders;
    if (typeof reasonOrHeaders === 'string') res.statusMessage = reasonOrHeaders;
    else headers = reasonOrHeaders;
    if (Array.isArray(headers)) {
      // Node's flat raw form: [name, value, name, value, …].
      for (let i = 0; i + 1 < headers.length; i += 2) {
        res.setHeader(String(headers[i]), headers[i + 1] as string);
      }
    } else if (headers) {
      for (const [name, value] of Object.entries(headers as OutgoingHttpHeaders)) {
        if (value !== undefined) res.setHeader(name, value);
      }
    }
    this.#commit();
    this.#started();
    return res;
  }

  #commit(): void {
    if (this.#committed) return;
    this.#committed = true;
    this.#status = this.#res.statusCode;
  }

  /** A started response not yet ended: a close now means it failed mid-response (a one-call end skips this). */
  #started(): void {
    if (this.#listening || this.#ended) return;
    this.#listening = true;
    // `on`, not `once` (no wrapper per response): `restore` removes it, and #closed runs at most once anyway.
    this.#res.on('close', ResponseCapture.#onClose);
  }

  write(chunk: unknown, encoding?: BufferEncoding | Callback, callback?: Callback): boolean {
    const cb = typeof encoding === 'function' ? encoding : callback;
    this.#commit();
    this.#started();
    this.#push(chunk, typeof encoding === 'string' ? encoding : undefined);
    if (cb) process.nextTick(cb);
    return true;
  }

  end(chunk?: unknown, encoding?: BufferEncoding | Callback, callback?: Callback): ServerResponse {
    if (typeof chunk === 'function') {
      callback = chunk as Callback;
      chunk = undefined;
    } else if (typeof encoding === 'function') {
      callback = encoding;
      encoding = undefined;
    }
    if (this.#ended) return this.#res;
    this.#push(chunk, encoding as BufferEncoding | undefined);
    this.#commit();
    this.#ended = true;
    this.#endCallback = callback;
    this.#finish('ended');
    return this.#res;
  }

  #push(chunk: unknown, encoding: BufferEncoding | undefined): void {
    if (chunk === undefined || chunk === null) return;
    if (typeof chunk === 'string') this.#chunks.push(Buffer.from(chunk, encoding ?? 'utf8'));
    // A copy: a route may reuse its buffer once write() returned.
    else if (chunk instanceof Uint8Array) this.#chunks.push(Buffer.from(chunk));
  }
}
