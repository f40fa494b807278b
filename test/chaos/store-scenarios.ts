/**
 * Scenarios 1-4 of the chaos rig, each run on Redis, PostgreSQL (`transaction: false`, the mark beside the
 * effect) and PostgreSQL with the effect in the mark's transaction (`postgres-tx`). Every run owns its servers: a
 * private redis-server (append-only file, fsync always, so a restart keeps what it acknowledged) or a private
 * PostgreSQL cluster, on spare ports, stopped at the end.
 *
 * 1. `pause-long`: worker 0 SIGSTOPped for 2.5 leases, then SIGCONT, `longPauses` times: a stale owner resuming.
 *    With a lease, the resumed handler may apply its effect after another worker took the lapsed claim and
 *    applied it: at most one extra effect per pause (a worker handles one message at a time). In the mark's
 *    transaction the claim is a row lock the lease cannot lapse from: 0 duplicates.
 * 2. `gc-pauses`: every worker stopped again and again for 10-25 % of the lease (GC pauses): 0 duplicates.
 * 3. `restart`: the store server killed (Redis SIGKILL, PostgreSQL SIGQUIT: no shutdown) and started again on the
 *    same data, `restarts` times: 0 lost; a message whose effect ran but whose confirm failed is redelivered
 *    once its claim lapses (at most one per worker per restart), 0 in the mark's transaction.
 * 4. `network`: the workers reach the store through a TCP proxy that delays every chunk, resets every
 *    connection, freezes, then refuses connections: 0 lost; duplicates bounded as for a restart.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OwnPostgres } from '../helpers/own-postgres.js';
import { OwnRedis, sparePort } from '../helpers/redis-server.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import type { ChaosSizes } from './sizes.js';
import type { ChaosStore } from './worker.js';
import { type ChaosWorker, runStoreScenario, type StoreRunResult, until } from './workers.js';

export const STORES: readonly ChaosStore[] = ['redis', 'postgres', 'postgres-tx'];

export type StoreScenarioName = 'pause-long' | 'gc-pauses' | 'restart' | 'network';
export const STORE_SCENARIOS: readonly StoreScenarioName[] = [
  'pause-long',
  'gc-pauses',
  'restart',
  'network',
];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A private store server for one run: restartable, with the address its clients use. */
interface OwnServer {
  readonly url: string;
  readonly port: number;
  /** Kills the server without a shutdown. */
  crash(): Promise<void>;
  /** Starts it again on the same data and port. */
  start(): Promise<void>;
  close(): Promise<void>;
}

async function ownServer(store: ChaosStore): Promise<OwnServer> {
  if (store === 'redis') {
    const dir = await mkdtemp(join(tmpdir(), 'idem-chaos-redis-'));
    // Append-only, fsync always: a SIGKILL loses nothing the server acknowledged, as a durable store must not.
    const redis = new OwnRedis(await sparePort(), [
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--dir',
      dir,
    ]);
    await redis.start();
    return {
      url: redis.url,
      port: redis.port,
      crash: () => redis.kill(),
      start: () => redis.start(),
      close: async () => {
        await redis.kill();
        await rm(dir, { recursive: true, force: true });
      },
    };
  }
  const postgres = await OwnPostgres.start();
  return {
    url: postgres.url,
    port: postgres.port,
    crash: () => postgres.crash(),
    start: () => postgres.restart(),
    close: () => postgres.destroy(),
  };
}

/** `url` with its port replaced (to go through a proxy). */
function viaPort(url: string, port: number): string {
  const u = new URL(url);
  u.port = String(port);
  return u.href;
}

const allDone = (workers: readonly ChaosWorker[]) => workers.every((w) => w.finished || !w.running);

/** Waits until every worker has settled a few ids: the chaos lands on running work, not on start-up. */
function working(workers: readonly ChaosWorker[], sizes: ChaosSizes): Promise<void> {
  const some = Math.max(1, Math.floor(sizes.ids / 50));
  return until(
    () => workers.every((w) => w.settled >= some || w.finished),
    120_000,
    'the workers to start work',
  );
}

/** Extra effects a lease allows after `events` outages: one in-flight message per worker each; none in a transaction. */
function outageAllowance(store: ChaosStore, events: number, workers: number) {
  return store === 'postgres-tx'
    ? { extra: 0, why: 'effect in the mark’s transaction' }
    : { extra: events * workers, why: 'one in-flight message per worker per outage' };
}

/** Runs one scenario on one store, on a private server; the ledger and the workers' counters. */
export async function runStoreChaos(
  scenario: StoreScenarioName,
  store: ChaosStore,
  sizes: ChaosSizes,
  log: (line: string) => void = () => undefined,
): Promise<StoreRunResult> {
  const server = await ownServer(store);
  const proxy =
    scenario === 'network' ? await TcpProxy.start({ host: '127.0.0.1', port: server.port }) : undefined;
  const leaseMs = scenario === 'gc-pauses' ? sizes.gcLeaseMs : sizes.leaseMs;
  const base = {
    name: `${scenario}/${store}`,
    store,
    url: proxy ? viaPort(server.url, proxy.port) : server.url,
    directUrl: server.url,
    workers: sizes.workers,
    ids: sizes.ids,
    leaseMs,
    handlerMs: sizes.handlerMs,
    timeoutMs: sizes.runTimeoutMs,
    log,
  };
  try {
    switch (scenario) {
      case 'pause-long':
        return await runStoreScenario({
          ...base,
          async chaos(workers) {
            const stale = workers[0] as ChaosWorker;
            await working(workers, sizes);
            const pauseMs = Math.round(leaseMs * 2.5);
            for (let i = 0; i < sizes.longPauses && !stale.finished; i++) {
              await stale.pause(pauseMs);
              log(`${base.name}: worker 0 resumed after ${pauseMs} ms (${stale.settled} settled)`);
              await sleep(leaseMs);
            }
            return {
              description: `${stale.pauses}× SIGSTOP of 1 worker for ${pauseMs / 1000} s`,
              events: stale.pauses,
            };
          },
          allowed: (events) =>
            store === 'postgres-tx'
              ? { extra: 0, why: 'effect in the mark’s transaction' }
              : { extra: events, why: 'one stale owner per pause' },
        });
      case 'gc-pauses':
        return await runStoreScenario({
          ...base,
          async chaos(workers) {
            await working(workers, sizes);
            await Promise.all(
              workers.map(async (worker) => {
                for (let i = 0; i < sizes.gcCycles && !worker.finished; i++) {
                  await sleep(leaseMs * (0.2 + Math.random() * 0.3));
                  await worker.pause(Math.round(leaseMs * (0.1 + Math.random() * 0.15)));
                }
              }),
            );
            const pauses = workers.reduce((n, w) => n + w.pauses, 0);
            const longest = Math.round(leaseMs * 0.25);
            return {
              description: `${pauses} SIGSTOPs of ≤ ${longest} ms (lease ${leaseMs} ms)`,
              events: pauses,
            };
          },
          allowed: () => ({ extra: 0, why: 'pauses shorter than the lease' }),
        });
      case 'restart':
        return await runStoreScenario({
          ...base,
          async chaos(workers) {
            await working(workers, sizes);
            let restarts = 0;
            for (let i = 0; i < sizes.restarts && !allDone(workers); i++) {
              await server.crash();
              await sleep(sizes.outageMs);
              await server.start();
              restarts++;
              log(`${base.name}: server restarted (${restarts})`);
              await sleep(sizes.outageMs * 2);
            }
            return {
              description: `${restarts} server kill+restart, ${sizes.outageMs} ms down`,
              events: restarts,
            };
          },
          allowed: (events, workers) => outageAllowance(store, events, workers.length),
        });
      case 'network':
        return await runStoreScenario({
          ...base,
          async chaos(workers) {
            const p = proxy as TcpProxy;
            await working(workers, sizes);
            let events = 0;
            let rounds = 0;
            for (let i = 0; i < sizes.networkRounds && !allDone(workers); i++) {
              p.delay(40);
              await sleep(sizes.outageMs);
              p.delay(0);
              p.cut();
              events++;
              await sleep(sizes.outageMs);
              p.freeze();
              await sleep(sizes.outageMs);
              p.thaw();
              events++;
              await sleep(sizes.outageMs);
              p.refuse(true);
              p.cut();
              await sleep(sizes.outageMs);
              p.refuse(false);
              events++;
              rounds++;
              await sleep(sizes.outageMs);
            }
            return {
              description: `${rounds}× (40 ms delay, reset, ${sizes.outageMs} ms freeze, ${sizes.outageMs} ms refused)`,
              events,
            };
          },
          allowed: (events, workers) => outageAllowance(store, events, workers.length),
        });
      default:
        throw new Error(`unknown chaos scenario ${scenario satisfies never}`);
    }
  } finally {
    await proxy?.close();
    await server.close();
  }
}
