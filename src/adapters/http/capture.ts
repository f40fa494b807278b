import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

/** A route's response as the adapter keeps it: status, the chosen headers, and the body bytes. */
export interface CapturedResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer;
}

type Callback = (error?: Error | null) => void;

const SHADOWED = ['headersSent', 'writableEnded'] as const;
const HEADER_SETTERS = ['setHeader', 'removeHeader', 'appendHeader'] as const;

/** How a captured response finished: the route ended it, or the connection closed after it started writing. */
export type CaptureEnd = 'ended' | 'aborted';

/** Node's own error for a header written after the headers went out, so error handlers see what they expect. */
function headersSentError(): Error {
  return Object.assign(new Error('Cannot set headers after they are sent to the client'), {
    code: 'ERR_HTTP_HEADERS_SENT',
  });
}

/**
 * Holds back what a route writes to a Node `ServerResponse` until {@link ResponseCapture.flush}. The response is
 * stored before the client sees it, so a client that got an answer never finds its key still in flight.
 * Express and Fastify both end in `writeHead`/`write`/`end`, so one capture serves both.
 */
export class ResponseCapture {
  readonly #res: ServerResponse;
  readonly #chunks: Buffer[] = [];
  #endCallback: Callback | undefined;
  #ended = false;
  /**
   * The route called `writeHead` or `write`: Node would have sent the headers then, so from here on they look
   * sent and cannot change (an error handler then drops the connection instead of writing a second response
   * with its own framing under the first one's bytes).
   */
  #committed = false;
  #status: number | undefined;
  #aborted = false;
  #restored = false;
  readonly #done: Promise<CaptureEnd>;
  #resolveDone!: (end: CaptureEnd) => void;
  readonly #onClose = () => {
    // The connection closed before the route ended a response it had started: it failed mid-response.
    if (this.#ended || !this.#committed) return;
    this.#aborted = true;
    this.#resolveDone('aborted');
  };

  constructor(res: ServerResponse) {
    this.#res = res;
    this.#done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
    // Own properties shadow the prototype's methods; `restore` deletes them again.
    const own = res as unknown as Record<string, unknown>;
    const proto = Object.getPrototypeOf(res) as Record<string, (...args: unknown[]) => unknown>;
    own.writeHead = this.#writeHead;
    own.write = this.#write;
    own.end = this.#end;
    own.flushHeaders = () => {};
    for (const name of HEADER_SETTERS) {
      const real = proto[name];
      if (typeof real !== 'function') continue;
      own[name] = (...args: unknown[]) => {
        if (this.#committed) throw headersSentError();
        return real.apply(res, args);
      };
    }
    // Once the route started or ended its response, it must look sent: Fastify sends again a reply that is
    // not `sent` after an async route that called `reply.send` returns, and Express and Fastify check
    // `headersSent` before writing an error.
    Object.defineProperty(res, 'headersSent', {
      configurable: true,
      get: () => this.#committed || this.#ended || Reflect.get(proto, 'headersSent', res),
    });
    Object.defineProperty(res, 'writableEnded', {
      configurable: true,
      get: () => this.#ended || Reflect.get(proto, 'writableEnded', res),
    });
    res.once('close', this.#onClose);
  }

  /**
   * Resolves when the route ended its response (`ended`), or when the connection closed after the route had
   * started it (`aborted`: the route failed mid-response). It may never resolve, if the route hangs or crashed
   * before writing.
   */
  get ended(): Promise<CaptureEnd> {
    return this.#done;
  }

  /**
   * The response as written, with only the headers whose lower-case names are in `keep`; undefined when it
   * cannot be sent as a whole: the route did not end it, or its body disagrees with its own Content-Length.
   */
  snapshot(keep: ReadonlySet<string>): CapturedResponse | undefined {
    if (!this.#ended || this.#aborted) return undefined;
    const body = Buffer.concat(this.#chunks);
    if (!this.#framed(body.length)) return undefined;
    const headers: Record<string, string | readonly string[]> = {};
    for (const [name, value] of Object.entries(this.#res.getHeaders())) {
      if (value === undefined || !keep.has(name)) continue;
      headers[name] = Array.isArray(value) ? value.map(String) : String(value);
    }
    return { status: this.#status ?? this.#res.statusCode, headers, body };
  }

  /** True when the body length agrees with the response's Content-Length (or it has none). */
  #framed(length: number): boolean {
    const declared = this.#res.getHeader('content-length');
    if (declared === undefined) return true;
    return Number(Array.isArray(declared) ? declared[0] : declared) === length;
  }

  /** Puts the real methods back without writing anything (the route will not run). */
  restore(): void {
    if (this.#restored) return;
    this.#restored = true;
    const own = this.#res as unknown as Record<string, unknown>;
    this.#res.off('close', this.#onClose);
    delete own.writeHead;
    delete own.write;
    delete own.end;
    delete own.flushHeaders;
    for (const name of HEADER_SETTERS) delete own[name];
    for (const name of SHADOWED) delete own[name];
  }

  /**
   * Sends what the route wrote, as it wrote it; from then on writes go straight through. A response that
   * failed mid-way, or whose body disagrees with its Content-Length, is never sent: the connection is
   * closed instead, as Node closes it when a route fails after writing, so no byte can be read as the next
   * response on a keep-alive connection.
   */
  flush(): void {
    this.restore();
    const callback = this.#endCallback;
    if (this.#aborted || (this.#ended && !this.#framed(this.#chunks.reduce((n, c) => n + c.length, 0)))) {
      this.#chunks.length = 0;
      this.#res.destroy();
      return;
    }
    if (!this.#ended) {
      // The route is still writing (the store answered first): hand over what it wrote so far.
      for (const chunk of this.#chunks.splice(0)) this.#res.write(chunk);
      return;
    }
    const body = Buffer.concat(this.#chunks);
    this.#chunks.length = 0;
    if (callback) this.#res.end(body, callback);
    else this.#res.end(body);
  }

  readonly #writeHead = (
    status: number,
    reasonOrHeaders?: string | OutgoingHttpHeaders | readonly unknown[],
    maybeHeaders?: OutgoingHttpHeaders | readonly unknown[],
  ): ServerResponse => {
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
    return res;
  };

  #commit(): void {
    if (this.#committed) return;
    this.#committed = true;
    this.#status = this.#res.statusCode;
  }

  readonly #write = (chunk: unknown, encoding?: BufferEncoding | Callback, callback?: Callback): boolean => {
    const cb = typeof encoding === 'function' ? encoding : callback;
    this.#commit();
    this.#push(chunk, typeof encoding === 'string' ? encoding : undefined);
    if (cb) process.nextTick(cb);
    return true;
  };

  readonly #end = (
    chunk?: unknown,
    encoding?: BufferEncoding | Callback,
    callback?: Callback,
  ): ServerResponse => {
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
    this.#resolveDone('ended');
    return this.#res;
  };

  #push(chunk: unknown, encoding: BufferEncoding | undefined): void {
    if (chunk === undefined || chunk === null) return;
    if (typeof chunk === 'string') this.#chunks.push(Buffer.from(chunk, encoding ?? 'utf8'));
    // A copy: a route may reuse its buffer once write() returned.
    else if (chunk instanceof Uint8Array) this.#chunks.push(Buffer.from(chunk));
  }
}
