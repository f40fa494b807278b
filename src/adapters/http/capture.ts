import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';

/** A route's response as the adapter keeps it: status, the chosen headers, and the body bytes. */
export interface CapturedResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | readonly string[]>>;
  readonly body: Buffer;
}

type Callback = (error?: Error | null) => void;

const SHADOWED = ['headersSent', 'writableEnded'] as const;

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
  #restored = false;
  readonly #done: Promise<void>;
  #resolveDone!: () => void;

  constructor(res: ServerResponse) {
    this.#res = res;
    this.#done = new Promise((resolve) => {
      this.#resolveDone = resolve;
    });
    // Own properties shadow the prototype's methods; `restore` deletes them again.
    const own = res as unknown as Record<string, unknown>;
    own.writeHead = this.#writeHead;
    own.write = this.#write;
    own.end = this.#end;
    own.flushHeaders = () => {};
    // Once the route ended, it must look sent: Fastify sends again a reply that is not `sent` after an async
    // route that called `reply.send` returns, and Express checks `headersSent` before writing an error.
    for (const name of SHADOWED) {
      Object.defineProperty(res, name, {
        configurable: true,
        get: () => this.#ended || Reflect.get(Object.getPrototypeOf(res), name, res),
      });
    }
  }

  /** Resolves when the route ended its response (it may never, if the route hangs or crashed). */
  get ended(): Promise<void> {
    return this.#done;
  }

  /** The response as written so far, with only the headers whose lower-case names are in `keep`. */
  snapshot(keep: ReadonlySet<string>): CapturedResponse {
    const headers: Record<string, string | readonly string[]> = {};
    for (const [name, value] of Object.entries(this.#res.getHeaders())) {
      if (value === undefined || !keep.has(name)) continue;
      headers[name] = Array.isArray(value) ? value.map(String) : String(value);
    }
    return { status: this.#res.statusCode, headers, body: Buffer.concat(this.#chunks) };
  }

  /** Puts the real methods back without writing anything (the route will not run). */
  restore(): void {
    if (this.#restored) return;
    this.#restored = true;
    const own = this.#res as unknown as Record<string, unknown>;
    delete own.writeHead;
    delete own.write;
    delete own.end;
    delete own.flushHeaders;
    for (const name of SHADOWED) delete own[name];
  }

  /** Sends what the route wrote, as it wrote it; from then on writes go straight through. */
  flush(): void {
    this.restore();
    const callback = this.#endCallback;
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
    return res;
  };

  readonly #write = (chunk: unknown, encoding?: BufferEncoding | Callback, callback?: Callback): boolean => {
    const cb = typeof encoding === 'function' ? encoding : callback;
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
    this.#ended = true;
    this.#endCallback = callback;
    this.#resolveDone();
    return this.#res;
  };

  #push(chunk: unknown, encoding: BufferEncoding | undefined): void {
    if (chunk === undefined || chunk === null) return;
    if (typeof chunk === 'string') this.#chunks.push(Buffer.from(chunk, encoding ?? 'utf8'));
    // A copy: a route may reuse its buffer once write() returned.
    else if (chunk instanceof Uint8Array) this.#chunks.push(Buffer.from(chunk));
  }
}
