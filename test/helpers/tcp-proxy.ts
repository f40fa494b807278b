/**
 * A loopback TCP proxy owned by one test: its clients reach a shared server through it, and the test can freeze,
 * slow or cut their path without touching the server, so the other test files running beside it never see an
 * outage.
 *
 * - `freeze()`: nothing passes either way and new connections are accepted but not carried on, as when the server's
 *   process is stopped (SIGSTOP): sockets stay open, nothing answers, only the client's own timeouts end a call.
 *   `thaw()` delivers what waited, in order.
 * - `delay(ms)`: every chunk is held `ms` before it is passed on (a slow network); `delay(0)` ends it.
 * - `cut()`: every open connection is reset (a dropped network or a restarted server); new ones are served.
 * - `refuse(true)`: new connections are closed at once (a server that is down).
 * - `exchanges`: round trips so far, every connection's: a client's bytes that follow the server's answer (or
 *   open the connection) start one; bytes it sends before the server answered ride in the same one.
 *
 * Suitable for protocols whose clients keep using the address they were given (Redis, PostgreSQL, MySQL, a single
 * Cassandra contact point), not for Kafka, whose clients reconnect to the addresses the broker advertises.
 */
import { once } from 'node:events';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import type { TestContext } from 'node:test';

interface Pair {
  readonly client: Socket;
  upstream: Socket | undefined;
  /** Chunks held while frozen, per direction. */
  readonly toUpstream: Buffer[];
  readonly toClient: Buffer[];
  /** Who sent the last chunk. */
  last: 'client' | 'server' | undefined;
}

export class TcpProxy {
  readonly #server: Server;
  readonly #pairs = new Set<Pair>();
  #frozen = false;
  #refusing = false;
  #delayMs = 0;
  /** Connections accepted in all. */
  accepted = 0;
  /** Round trips in all (see the file comment). */
  exchanges = 0;

  private constructor(
    readonly targetHost: string,
    readonly targetPort: number,
  ) {
    this.#server = createServer((client) => this.#accept(client));
  }

  /** Starts a proxy on a spare loopback port to `host:port`; closed after the test when `t` is given. */
  static async start(target: { host: string; port: number }, t?: TestContext): Promise<TcpProxy> {
    const proxy = new TcpProxy(target.host, target.port);
    proxy.#server.listen(0, '127.0.0.1');
    await once(proxy.#server, 'listening');
    t?.after(() => proxy.close());
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as { port: number }).port;
  }

  /** `127.0.0.1:port`, the address to give clients. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  get frozen(): boolean {
    return this.#frozen;
  }

  freeze(): void {
    this.#frozen = true;
    for (const pair of this.#pairs) {
      pair.client.pause();
      pair.upstream?.pause();
    }
  }

  thaw(): void {
    if (!this.#frozen) return;
    this.#frozen = false;
    for (const pair of this.#pairs) {
      if (pair.upstream === undefined) this.#connectUpstream(pair);
      this.#flush(pair);
      pair.client.resume();
      pair.upstream?.resume();
    }
  }

  delay(ms: number): void {
    this.#delayMs = ms;
  }

  refuse(on: boolean): void {
    this.#refusing = on;
  }

  /** Resets every open connection. */
  cut(): void {
    for (const pair of this.#pairs) this.#end(pair);
  }

  async close(): Promise<void> {
    this.#frozen = false;
    this.cut();
    if (!this.#server.listening) return;
    const closed = once(this.#server, 'close');
    this.#server.close();
    await closed;
  }

  #accept(client: Socket): void {
    this.accepted++;
    if (this.#refusing) {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = { client, upstream: undefined, toUpstream: [], toClient: [], last: undefined };
    this.#pairs.add(pair);
    client.setNoDelay(true);
    client.on('data', (chunk) => this.#pass(pair, 'toUpstream', chunk));
    client.on('error', () => this.#end(pair));
    client.on('close', () => this.#end(pair));
    if (this.#frozen) client.pause();
    else this.#connectUpstream(pair);
  }

  #connectUpstream(pair: Pair): void {
    const upstream = createConnection({ host: this.targetHost, port: this.targetPort });
    pair.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('data', (chunk) => this.#pass(pair, 'toClient', chunk));
    upstream.on('error', () => this.#end(pair));
    upstream.on('close', () => this.#end(pair));
  }

  #pass(pair: Pair, direction: 'toUpstream' | 'toClient', chunk: Buffer): void {
    const from = direction === 'toUpstream' ? 'client' : 'server';
    if (from === 'client' && pair.last !== 'client') this.exchanges++;
    pair.last = from;
    if (this.#frozen || pair.upstream === undefined) {
      pair[direction].push(chunk);
      return;
    }
    const write = () => {
      if (this.#frozen) {
        pair[direction].push(chunk);
        return;
      }
      (direction === 'toUpstream' ? pair.upstream : pair.client)?.write(chunk);
    };
    if (this.#delayMs > 0) setTimeout(write, this.#delayMs);
    else write();
  }

  #flush(pair: Pair): void {
    for (const chunk of pair.toUpstream.splice(0)) pair.upstream?.write(chunk);
    for (const chunk of pair.toClient.splice(0)) pair.client.write(chunk);
  }

  #end(pair: Pair): void {
    if (!this.#pairs.delete(pair)) return;
    pair.client.resetAndDestroy();
    pair.upstream?.resetAndDestroy();
  }
}
