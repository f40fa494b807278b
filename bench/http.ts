/**
 * HTTP overhead of the `Idempotency-Key` adapter: requests/s of the example app's `POST /charges`
 * (examples/http/server.ts) without the adapter, and with it on the memory and Redis stores, driven by a small
 * keep-alive client loop in the same process (`node:http` with a keep-alive agent: `fetch` costs several times
 * more CPU per request here, which would hide the server's own cost). Every request carries a new key (claim, route, store the
 * response); the `replay` rows send one key again and again (the stored response answers). The example app sets
 * `scope` to the signed-in user; the `default scope` rows mount the same route behind an adapter without a
 * `scope` hook, whose default scopes keys by a SHA-256 digest of the request's credential headers. The `bound` row
 * is the least any key middleware can do on this route (issue #34 asks for the bound, measured): the same key
 * and fingerprint over a bare Map, no lease, no engine, no codec, the response written through as it is kept
 * (none held back). Prints figures and ratios against the baseline measured in the same run, and the load
 * average; asserts nothing.
 *
 *   npm run bench:http [-- --seconds 3 --concurrency 16 --rounds 3 --redis redis://127.0.0.1:6379] [--json FILE]
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import express, { type Express } from 'express';
import { createExampleApp } from '../examples/http/server.js';
import { idempotencyKey } from '../src/adapters/http/index.js';
import { MemoryRepository } from '../src/repositories/memory/index.js';
import { RedisRepository } from '../src/repositories/redis/index.js';
import type { IdempotentRepository } from '../src/store/types.js';
import { boundApp } from './http-bound-app.js';
import { FigureSink, median } from './report/figures.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '3' },
    redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
    json: { type: 'string' },
  },
});
const SECONDS = Number(values.seconds);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Math.max(1, Number(values.rounds));
const body = JSON.stringify({ amount: 1999, currency: 'eur' });

const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });

/** One POST on a kept-alive connection; resolves with the status once the body is read. */
function post(port: number, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/charges',
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'idempotency-key': key,
          authorization: 'Bearer alice-token',
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Drives the app on `port` with CONCURRENCY loops for SECONDS (after a short warm-up); returns requests/s. */
async function drive(
  port: number,
  key: () => string,
): Promise<{ rps: number; statuses: Record<number, number> }> {
  const statuses: Record<number, number> = {};
  const run = async (until: number, count: boolean) => {
    let n = 0;
    while (performance.now() < until) {
      const status = await post(port, key());
      if (count) statuses[status] = (statuses[status] ?? 0) + 1;
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

/**
 * The example's `POST /charges` behind an adapter with the default scope (no `scope` hook: the digest of the
 * credential headers), and without the example's sign-in step, which the default makes unnecessary for scoping.
 */
function defaultScopeApp(repository: IdempotentRepository | undefined): Express {
  let count = 0;
  const app = express();
  app.post(
    '/charges',
    express.json(),
    idempotencyKey({ repository: repository ?? new MemoryRepository() }),
    (req, res) => {
      count++;
      const id = `ch_${count}`;
      const { amount = 0, currency = 'eur' } = (req.body ?? {}) as { amount?: number; currency?: string };
      res.status(201).location(`/charges/${id}`).json({ id, amount, currency });
    },
  );
  return app;
}

/** Serves the app of a row (the example with the adapter over `repository`, or bare) and measures it. */
async function measure(
  label: string,
  repository: IdempotentRepository | undefined,
  key: () => string,
  build?: (repository: IdempotentRepository | undefined) => Express,
): Promise<number> {
  const app = build ? build(repository) : createExampleApp(repository ? { repository } : undefined).app;
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  try {
    const { rps, statuses } = await drive(port, key);
    console.log(
      `${label.padEnd(42)} ${rps.toFixed(0).padStart(7)} req/s   statuses ${JSON.stringify(statuses)}`,
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
  `${SECONDS} s per row, ${CONCURRENCY} concurrent keep-alive client loops (node:http), client and server in one process; ` +
    `${ROUNDS} rounds, each row between two baseline runs; figures are medians over the rounds`,
);
const redis = await RedisRepository.open({
  url: values.redis,
  keyPrefix: `idem-bench-http:${randomUUID()}:`,
});
const rows: {
  label: string;
  repository: IdempotentRepository | undefined;
  key: () => string;
  build?: (repository: IdempotentRepository | undefined) => Express;
}[] = [
  { label: 'baseline: no adapter', repository: undefined, key: newKey },
  { label: 'adapter, memory, new keys', repository: new MemoryRepository(), key: newKey },
  { label: 'adapter, memory, replays', repository: new MemoryRepository(), key: oneKey() },
  { label: 'bound: least key middleware, new keys', repository: undefined, key: newKey, build: boundApp },
  {
    label: 'adapter, memory, new keys, default scope',
    repository: new MemoryRepository(),
    key: newKey,
    build: defaultScopeApp,
  },
  {
    label: 'adapter, memory, replays, default scope',
    repository: new MemoryRepository(),
    key: oneKey(),
    build: defaultScopeApp,
  },
  { label: 'adapter, redis, new keys', repository: redis, key: newKey },
  { label: 'adapter, redis, replays', repository: redis, key: oneKey() },
];
// The machine is shared and its speed drifts within seconds (a round measured every row 1.4x faster than the one
// before). So each row is judged against the baseline measured right before and right after it, and the figure is
// the median of those ratios over the rounds; the req/s columns are medians too and only give the scale.
const ratios = new Map<string, number[]>();
const rates = new Map<string, number[]>();
const note = (map: Map<string, number[]>, label: string, value: number) =>
  map.set(label, [...(map.get(label) ?? []), value]);
const [baselineRow, ...adapterRows] = rows as [(typeof rows)[number], ...typeof rows];
const run = (row: (typeof rows)[number]) => measure(row.label, row.repository, row.key, row.build);
try {
  for (let round = 0; round < ROUNDS; round++) {
    let before = await run(baselineRow);
    note(rates, baselineRow.label, before);
    for (const row of adapterRows) {
      const rps = await run(row);
      const after = await run(baselineRow);
      note(rates, baselineRow.label, after);
      note(rates, row.label, rps);
      note(ratios, row.label, rps / ((before + after) / 2));
      before = after;
    }
  }
} finally {
  agent.destroy();
  await redis.clear();
  await redis.close();
}
console.log(
  `load average after:  ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
const sink = new FigureSink(
  'http',
  `npm run bench:http -- --seconds ${SECONDS} --concurrency ${CONCURRENCY} --rounds ${ROUNDS}`,
);
/** Issue 22's targets: new keys on the memory store ≥ 0.9× the bare route, replays ≥ 1.0×. */
const TARGETS: Record<string, number> = {
  'adapter, memory, new keys': 0.9,
  'adapter, memory, replays': 1,
};
for (const [label, values] of rates) {
  const rps = median(values);
  sink.figure(label, rps, 'req/s');
  if (label.startsWith('baseline')) continue;
  const perRound = ratios.get(label) ?? [];
  const ratio = median(perRound);
  console.log(
    `${label.padEnd(42)} ${rps.toFixed(0).padStart(7)} req/s; ${ratio.toFixed(2)} of the baseline beside it ` +
      `(median of ${perRound.map((r) => r.toFixed(2)).join(', ')})`,
  );
  sink.ratio({
    id: `http.${label
      .replace(/^adapter, /, '')
      .replace(/^bound: .*, /, 'bound.')
      .replaceAll(', ', '.')
      .replaceAll(' ', '-')}`,
    label: `HTTP adapter, ${label.replace(/^adapter, /, '')}`,
    value: ratio,
    ...(TARGETS[label] === undefined ? {} : { target: TARGETS[label] }),
    kind: 'min',
    baseline: 'the same route without the adapter, measured right before and after it; median of the rounds',
  });
}
sink.write(values.json);
