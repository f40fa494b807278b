/**
 * HTTP overhead of the `Idempotency-Key` adapter: requests/s of the example app's `POST /charges`
 * (examples/http/server.ts) without the adapter, and with it on the memory and Redis stores, driven by a small
 * keep-alive `fetch` loop in the same process. Every request carries a new key (claim, route, store the
 * response); the `replay` rows send one key again and again (the stored response answers). Prints figures and
 * ratios against the baseline measured in the same run, and the load average; asserts nothing.
 *
 *   npm run bench:http [-- --seconds 3 --concurrency 16 --redis redis://127.0.0.1:6379]
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { createExampleApp } from '../examples/http/server.js';
import { MemoryRepository } from '../src/repositories/memory/index.js';
import { RedisRepository } from '../src/repositories/redis/index.js';
import type { IdempotentRepository } from '../src/repositories/types.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '16' },
    redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
  },
});
const SECONDS = Number(values.seconds);
const CONCURRENCY = Number(values.concurrency);
const body = JSON.stringify({ amount: 1999, currency: 'eur' });

/** Drives `url` with CONCURRENCY loops for SECONDS (after a short warm-up); returns requests/s. */
async function drive(
  url: string,
  key: () => string,
): Promise<{ rps: number; statuses: Record<number, number> }> {
  const statuses: Record<number, number> = {};
  const run = async (until: number, count: boolean) => {
    let n = 0;
    while (performance.now() < until) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key() },
        body,
      });
      await response.arrayBuffer();
      if (count) statuses[response.status] = (statuses[response.status] ?? 0) + 1;
      n++;
    }
    return n;
  };
  const warm = performance.now() + Math.min(1_000, SECONDS * 200);
  await Promise.all(Array.from({ length: CONCURRENCY }, () => run(warm, false)));
  const start = performance.now();
  const counts = await Promise.all(
    Array.from({ length: CONCURRENCY }, () => run(start + SECONDS * 1_000, true)),
  );
  const total = counts.reduce((a, b) => a + b, 0);
  return { rps: total / ((performance.now() - start) / 1_000), statuses };
}

/** Serves the example app (with the adapter over `repository`, or bare) and measures it. */
async function measure(
  label: string,
  repository: IdempotentRepository | undefined,
  key: () => string,
): Promise<number> {
  const { app } = createExampleApp(repository ? { repository } : undefined);
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  try {
    const { rps, statuses } = await drive(`http://127.0.0.1:${port}/charges`, key);
    console.log(
      `${label.padEnd(36)} ${rps.toFixed(0).padStart(7)} req/s   statuses ${JSON.stringify(statuses)}`,
    );
    return rps;
  } finally {
    server.closeAllConnections();
    server.close();
  }
}

const newKey = () => randomUUID();
const oneKey = () => {
  const key = randomUUID();
  return () => key;
};

console.log(
  `load average before: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log(
  `${SECONDS} s per row, ${CONCURRENCY} concurrent keep-alive fetch loops, client and server in one process`,
);
const baseline = await measure('baseline: no adapter', undefined, newKey);
const memory = await measure('adapter, memory, new keys', new MemoryRepository(), newKey);
const memoryReplay = await measure('adapter, memory, replays', new MemoryRepository(), oneKey());
const redis = await RedisRepository.open({
  url: values.redis,
  keyPrefix: `idem-bench-http:${randomUUID()}:`,
});
let redisNew: number;
let redisReplay: number;
try {
  redisNew = await measure('adapter, redis, new keys', redis, newKey);
  redisReplay = await measure('adapter, redis, replays', redis, oneKey());
} finally {
  await redis.clear();
  await redis.close();
}
console.log(
  `load average after:  ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
const ratio = (rps: number) =>
  `${(baseline / rps).toFixed(2)}x the time per request (${((1 - rps / baseline) * 100).toFixed(0)}% fewer req/s)`;
console.log(`overhead, memory, new keys: ${ratio(memory)}`);
console.log(`overhead, memory, replays:  ${ratio(memoryReplay)}`);
console.log(`overhead, redis, new keys:  ${ratio(redisNew)}`);
console.log(`overhead, redis, replays:   ${ratio(redisReplay)}`);
