/**
 * Instructions per request of the `Idempotency-Key` adapter, counted by `valgrind --tool=cachegrind`: a count
 * the machine's load does not move (bench:http's req/s does, by ±20 % here). The example's `POST /charges`
 * (as bench:http serves it) runs bare, with the adapter over the memory store on new keys, and on replays of
 * one key. Each is run twice under cachegrind, with N and 2N requests after the same warm-up, so the count per
 * request is the difference over N: start-up, warm-up and JIT compilation cancel out. Prints each count and its
 * ratio to the bare route's (the inverse of bench:http's throughput ratio, for instructions alone).
 *
 *   node --import tsx bench/http-instructions.ts [--requests 2000] [--warmup 3000] [--transport handle|loopback]
 *
 * `handle`: the app's `handle` on requests made in process over a socket that discards what is written
 * (Express, the adapter and Node's response writer; no parser, no client). `loopback`: a real server and
 * bench:http's keep-alive client in one process (adds Node's parser and the client, as bench:http measures).
 * The child mode (`--child bare|memory|replay|bound`) serves one row and is what cachegrind runs; `bound` is
 * bench:http's bound row (bench/http-bound-app.ts), on new keys. `--rows` picks the rows (default: all but bound).
 */

import { once } from 'node:events';
import { Agent, IncomingMessage, request, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { loadavg } from 'node:os';
import { Duplex } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createExampleApp } from '../examples/http/server.js';
import { MemoryRepository } from '../src/repositories/memory/index.js';
import { cachegrind } from './cachegrind.js';
import { boundApp } from './http-bound-app.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '3000' },
    transport: { type: 'string', default: 'handle' },
    concurrency: { type: 'string', default: '16' },
    child: { type: 'string' },
    rows: { type: 'string', default: 'bare,memory,replay' },
  },
});
const CONCURRENCY = Number(values.concurrency);
const body = JSON.stringify({ amount: 1999, currency: 'eur' });
const HEADERS = {
  'content-type': 'application/json',
  'content-length': String(Buffer.byteLength(body)),
  authorization: 'Bearer alice-token',
};

/** A socket that takes every write and keeps nothing. */
class Discard extends Duplex {
  override _read(): void {}
  override _write(_chunk: unknown, _encoding: string, callback: () => void): void {
    callback();
  }
  override _writev(_chunks: unknown, callback: () => void): void {
    callback();
  }
}

type Handle = (req: IncomingMessage, res: ServerResponse) => void;

/** One request through `handle` on a discarding socket; resolves when the response finished. */
function handled(handle: Handle, socket: Socket, key: string): Promise<void> {
  const req = new IncomingMessage(socket);
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.httpVersion = '1.1';
  req.method = 'POST';
  req.url = '/charges';
  req.headers = { ...HEADERS, 'idempotency-key': key };
  req.push(body);
  req.push(null);
  // As Node's parser marks a request read to its end: else its end destroys the socket.
  req.complete = true;
  const res = new ServerResponse(req);
  // Kept alive, as bench:http's connections are: the socket serves the loop's next request.
  res.shouldKeepAlive = true;
  res.assignSocket(socket);
  return new Promise((resolve) => {
    res.on('finish', () => {
      res.detachSocket(socket);
      resolve();
    });
    handle(req, res);
  });
}

const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

/** bench:http's request: one POST on a kept-alive connection, resolved once its body is read. */
function posted(port: number, key: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/charges',
        method: 'POST',
        agent,
        headers: { ...HEADERS, 'idempotency-key': key },
      },
      (res) => {
        res.resume();
        res.on('end', resolve);
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Serves one row: warm-up, then `requests` requests, CONCURRENCY in flight. */
async function child(row: string, warmup: number, requests: number): Promise<void> {
  const repository = row === 'bare' || row === 'bound' ? undefined : new MemoryRepository();
  // `bound`: the least a key middleware can do on this route (see bench/http-bound-app.ts), on new keys.
  const app = row === 'bound' ? boundApp() : createExampleApp(repository ? { repository } : undefined).app;
  // Keys shaped like UUIDs but counted, not random: the same run counts the same instructions.
  let n = 0;
  const counted = () => `00000000-0000-4000-8000-${(n++).toString(16).padStart(12, '0')}`;
  const one = counted();
  const key = row === 'replay' ? () => one : counted;
  let send: (key: string) => Promise<void>;
  let close = () => {};
  if (values.transport === 'loopback') {
    const server = app.listen(0, '127.0.0.1');
    // Under cachegrind a request takes long enough for the default 5 s idle timeout to reset kept connections.
    server.keepAliveTimeout = 0;
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    send = (k) => posted(port, k);
    close = () => {
      agent.destroy();
      server.closeAllConnections();
      server.close();
    };
  } else {
    const sockets = Array.from({ length: CONCURRENCY }, () => new Discard() as unknown as Socket);
    let next = 0;
    send = (k) => handled(app as unknown as Handle, sockets[next++ % CONCURRENCY] as Socket, k);
  }
  const drive = async (n: number) => {
    let left = n;
    const loop = async () => {
      // Each loop owns a socket in `handle` mode: a loop sends its next request once its last one finished.
      while (left-- > 0) await send(key());
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  };
  await drive(warmup);
  const cpu = process.cpuUsage();
  await drive(requests);
  const { user, system } = process.cpuUsage(cpu);
  close();
  // A quick figure for trying changes without cachegrind (CPU time moves with the load; the count does not).
  console.log(`${row}: ${((user + system) / requests).toFixed(2)} µs CPU/request (process, all threads)`);
}

/** Instructions cachegrind counted for one child run. */
async function counted(row: string, requests: number): Promise<number> {
  const args = ['--child', row, '--requests', String(requests), '--warmup', values.warmup];
  args.push('--transport', values.transport, '--concurrency', values.concurrency);
  const { instructions } = await cachegrind(fileURLToPath(import.meta.url), args, `http-${row}-${requests}`);
  return instructions;
}

if (values.child !== undefined) {
  await child(values.child, Number(values.warmup), Number(values.requests));
} else {
  const n = Number(values.requests);
  const load = () =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
  console.log(`load average before: ${load()}`);
  console.log(
    `${values.transport}: ${values.warmup} warm-up requests, then ${n} and ${2 * n}; per request = difference / ${n}`,
  );
  const rows = values.rows.split(',');
  const perRequest = new Map<string, number>();
  // Every run at once: counts do not depend on the load, and cachegrind is slow.
  await Promise.all(
    rows.map(async (row) => {
      const [a, b] = await Promise.all([counted(row, n), counted(row, 2 * n)]);
      perRequest.set(row, (b - a) / n);
    }),
  );
  const bare = perRequest.get('bare');
  for (const row of rows) {
    const count = perRequest.get(row) as number;
    const ratio =
      bare === undefined
        ? ''
        : `  ${(count / bare).toFixed(3)}× bare (+${(((count - bare) / bare) * 100).toFixed(1)} %)`;
    console.log(`${row.padEnd(8)} ${(count / 1000).toFixed(1).padStart(8)} k instructions/request${ratio}`);
  }
  console.log(`load average after:  ${load()}`);
}
