import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';

const REDIS_SERVER = process.env.REDIS_SERVER_BIN ?? 'redis-server';

/**
 * Ports for the servers tests start and restart: below Linux's ephemeral range (32768-60999), from which the
 * kernel picks every outgoing connection's local port. While a private server is stopped, its clients keep
 * reconnecting to its port, and one of them can be given that very port (a TCP self-connect) or its neighbour:
 * the restarted server then cannot bind and the test waits it out (a private broker's restart timed out in CI so).
 */
const FIRST_PORT = 20_000;
const LAST_PORT = 32_000;

/** A Redis Cluster node also listens on its port + 10000 (the cluster bus). */
export const CLUSTER_BUS_OFFSET = 10_000;

/**
 * A loopback port nobody listens on right now, outside the ephemeral range (see {@link FIRST_PORT}). With
 * `clusterBus`, its cluster bus port (+10000) is free and below the ephemeral range too: a bus port in that
 * range can be taken by any outgoing connection's local port, and the node then fails to start (seen in CI).
 */
export async function sparePort(options: { clusterBus?: boolean } = {}): Promise<number> {
  const bus = options.clusterBus === true;
  const last = bus ? LAST_PORT - CLUSTER_BUS_OFFSET : LAST_PORT;
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = FIRST_PORT + Math.floor(Math.random() * (last - FIRST_PORT));
    if ((await portFree(port)) && (!bus || (await portFree(port + CLUSTER_BUS_OFFSET)))) return port;
  }
  throw new Error(`no free loopback port found between ${FIRST_PORT} and ${last}`);
}

/** Whether a loopback listener can take `port` now. */
export async function portFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * A redis-server child process owned by one test (never the shared stack's server): started on a spare loopback
 * port without persistence, killed with SIGKILL like a crash, restartable on the same port.
 */
export class OwnRedis {
  #child: ChildProcess | undefined;

  constructor(
    readonly port: number,
    readonly extraArgs: readonly string[] = [],
    readonly dir?: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the server and waits (bounded, ~20 s) until it answers PING. */
  async start(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
    const child = spawn(REDIS_SERVER, [...args, ...this.extraArgs], {
      stdio: 'ignore',
      ...(this.dir ? { cwd: this.dir } : {}),
    });
    this.#child = child;
    const exited = new Promise<never>((_, reject) => {
      child.once('error', reject);
      child.once('exit', (code) =>
        reject(new Error(`redis-server on ${this.port} exited with code ${code}`)),
      );
    });
    exited.catch(() => {});
    for (let attempt = 0; ; attempt++) {
      const probe = new Redis({
        port: this.port,
        host: '127.0.0.1',
        lazyConnect: true,
        retryStrategy: () => null,
      });
      probe.on('error', () => {});
      try {
        await Promise.race([probe.connect().then(() => probe.ping()), exited]);
        return;
      } catch (error) {
        if (attempt >= 100 || child.exitCode !== null) throw error;
        await sleep(200);
      } finally {
        probe.disconnect();
      }
    }
  }

  /** SIGKILL: no shutdown and no goodbye to clients, like a crashed server. */
  async kill(): Promise<void> {
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
}

/** Starts a server for the test and kills it after the test, whatever happens. */
export async function ownRedis(t: TestContext, extraArgs: readonly string[] = []): Promise<OwnRedis> {
  const server = new OwnRedis(await sparePort(), extraArgs);
  t.after(() => server.kill());
  await server.start();
  return server;
}
