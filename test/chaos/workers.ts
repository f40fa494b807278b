/**
 * The parent's side of the store scenarios: starts N worker processes (./worker.ts) on one run of ids, lets a
 * chaos function pause, resume or disturb them (or their store), waits for every worker to finish, and builds
 * the {@link Ledger}: effects per id (the ledger files, or the ledger table), and the store's record of every id
 * (an id still in flight at the end is stuck).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { migrate, PostgresRepository } from '../../src/repositories/postgres/index.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { countEffects, type Ledger } from './ledger.js';
import type { ChaosStore, WorkerReport, WorkerSpec } from './worker.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WORKER = fileURLToPath(new URL('./worker.ts', import.meta.url));

type Done = Extract<WorkerReport, { type: 'done' }>;

/** One worker process. */
export class ChaosWorker {
  readonly child: ChildProcess;
  /** Ids this worker has settled (processed or seen as a duplicate), as it last reported. */
  settled = 0;
  done: Done | undefined;
  /** The last progress report: its counters say why a worker that does not finish is stuck. */
  last: WorkerReport | undefined;
  /** Time spent stopped, and how many stops, as the chaos applied them. */
  pauses = 0;
  pausedMs = 0;
  #stderr = '';
  #error: string | undefined;
  readonly exited: Promise<number | null>;

  constructor(
    readonly spec: WorkerSpec,
    readonly index: number,
  ) {
    this.child = spawn(process.execPath, ['--import', 'tsx', WORKER, JSON.stringify(spec)], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      this.#stderr = (this.#stderr + text).slice(-4_000);
    });
    this.child.on('message', (report: WorkerReport) => {
      if (report.type === 'progress') {
        this.settled = report.settled;
        this.last = report;
      } else if (report.type === 'done') {
        this.done = report;
        this.settled = spec.count;
      } else this.#error = report.message;
    });
    this.exited = once(this.child, 'exit').then(([code]) => code as number | null);
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  get finished(): boolean {
    return this.done !== undefined;
  }

  /** SIGSTOP for `ms`, then SIGCONT (a GC pause, a frozen VM, a closed laptop lid). */
  async pause(ms: number): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGSTOP');
    this.pauses++;
    const started = Date.now();
    await new Promise((resolve) => setTimeout(resolve, ms));
    this.pausedMs += Date.now() - started;
    if (this.running) this.child.kill('SIGCONT');
  }

  /** Why the worker failed, with its last stderr. */
  failure(): string {
    return `worker ${this.spec.worker} (exit ${this.child.exitCode}): ${this.#error ?? ''}\n${this.#stderr}`;
  }

  async kill(): Promise<void> {
    if (this.running) this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** One store scenario: the run, the chaos, and what the guarantee allows. */
export interface StoreRun {
  /** Ledger name, `<scenario>/<store>`. */
  readonly name: string;
  readonly store: ChaosStore;
  /** Where the workers connect (the server, or a proxy in front of it). */
  readonly url: string;
  /** Where the rig itself connects (setup and the final check): the server, never through the chaos. */
  readonly directUrl: string;
  readonly workers: number;
  readonly ids: number;
  readonly leaseMs: number;
  readonly handlerMs: number;
  /** How long the whole run may take before it counts as stuck. */
  readonly timeoutMs: number;
  /** Applies the chaos while the workers run; answers what it did (for the verdict). */
  chaos(workers: readonly ChaosWorker[]): Promise<{ readonly description: string; readonly events: number }>;
  /** The most extra effects the guarantee allows after `events` chaos events. */
  allowed(events: number, workers: readonly ChaosWorker[]): { readonly extra: number; readonly why: string };
  readonly log?: (line: string) => void;
}

/** What a store run found, beside its ledger: each worker's counters. */
export interface StoreRunResult {
  readonly ledger: Ledger;
  readonly workers: readonly Done[];
}

/** Waits until `condition()` holds, checking every 50 ms; throws after `timeoutMs` naming `what`. */
export async function until(
  condition: () => boolean,
  timeoutMs: number,
  what: string | (() => string),
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const tableName = (label: string) => `chaos_${label}_${randomBytes(5).toString('hex')}`;

/** Runs one store scenario end to end; everything it made (tables, keys, files, processes) is removed. */
export async function runStoreScenario(run: StoreRun): Promise<StoreRunResult> {
  const tag = `c${randomBytes(4).toString('hex')}`;
  const namespace = `chaos-${tag}`;
  const sql = run.store !== 'redis';
  const table = sql ? tableName('marks') : undefined;
  const ledgerTable = run.store === 'postgres-tx' ? tableName('ledger') : undefined;
  const dir = await mkdtemp(join(tmpdir(), 'idem-chaos-'));
  const admin = sql ? new pg.Pool({ connectionString: run.directUrl, max: 2 }) : undefined;
  admin?.on('error', () => {});
  const workers: ChaosWorker[] = [];
  const started = Date.now();
  try {
    if (table) await migrate({ url: run.directUrl, table });
    if (ledgerTable)
      await admin?.query(`CREATE TABLE ${ledgerTable} (id text NOT NULL, worker text, attempt int)`);
    for (let i = 0; i < run.workers; i++) {
      const spec: WorkerSpec = {
        store: run.store,
        url: run.url,
        namespace,
        ...(table ? { table } : {}),
        ...(ledgerTable ? { ledgerTable } : { ledgerFile: join(dir, `w${i}.ledger`) }),
        worker: `w${i}-${tag}`,
        tag,
        count: run.ids,
        leaseMs: run.leaseMs,
        handlerMs: run.handlerMs,
        retryMs: 200,
      };
      workers.push(new ChaosWorker(spec, i));
    }
    const failed = () => workers.find((w) => !w.running && !w.finished);
    const chaos = run.chaos(workers);
    // A worker that dies is a failed run: say so at once, rather than at the timeout.
    const watch = until(
      () => failed() !== undefined || workers.every((w) => w.finished),
      run.timeoutMs,
      () =>
        `the ${run.workers} workers of ${run.name} to settle all ${run.ids} ids; settled so far: ` +
        workers
          .map(
            (w) => `${w.spec.worker} ${w.settled}${w.running ? '' : ' (exited)'} ${JSON.stringify(w.last)}`,
          )
          .join(', ') +
        `; stderr: ${workers.map((w) => w.failure()).join(' | ')}`,
    );
    const [applied] = await Promise.all([chaos, watch]);
    const dead = failed();
    if (dead) throw new Error(`${run.name}: ${dead.failure()}`);
    await until(() => workers.every((w) => !w.running), 30_000, `the workers of ${run.name} to exit`);

    const ids = Array.from({ length: run.ids }, (_, i) => `${tag}-${i}`);
    const effects = ledgerTable
      ? ((await admin?.query<{ id: string }>(`SELECT id FROM ${ledgerTable}`))?.rows.map((r) => r.id) ?? [])
      : await readLedgerFiles(dir);
    const counted = countEffects(ids, effects);
    const stuck = await countStuck(run, namespace, table, ids);
    const reports = workers.map((w) => w.done as Done);
    const allowed = run.allowed(applied.events, workers);
    const ledger: Ledger = {
      name: run.name,
      ...counted,
      deliveries: reports.reduce((n, r) => n + r.deliveries, 0),
      allowedExtra: allowed.extra,
      allowance: allowed.why,
      stuck,
      chaos: applied.description,
      elapsedMs: Date.now() - started,
    };
    return { ledger, workers: reports };
  } finally {
    await Promise.all(workers.map((w) => w.kill()));
    if (admin) {
      for (const t of [table, ledgerTable])
        if (t) await admin.query(`DROP TABLE IF EXISTS ${t}`).catch(() => undefined);
      await admin.end();
    }
    await rm(dir, { recursive: true, force: true });
  }
}

async function readLedgerFiles(dir: string): Promise<string[]> {
  const ids: string[] = [];
  for (const file of await readdir(dir)) {
    const text = await readFile(join(dir, file), 'utf8');
    for (const line of text.split('\n')) if (line !== '') ids.push(line.split(' ')[0] as string);
  }
  return ids;
}

/** Ids whose record is not confirmed once every worker is done: a claim left in flight, or no record at all. */
async function countStuck(
  run: StoreRun,
  namespace: string,
  table: string | undefined,
  ids: readonly string[],
): Promise<number> {
  const repository: IdempotentRepository =
    run.store === 'redis'
      ? await RedisRepository.open({ url: run.directUrl, keyPrefix: `${namespace}:` })
      : await PostgresRepository.open({ url: run.directUrl, table: table as string, namespace, poolSize: 1 });
  try {
    let stuck = 0;
    for (let i = 0; i < ids.length; i += 500) {
      const records = await repository.getMany(ids.slice(i, i + 500));
      stuck += records.filter((r) => r?.state !== 'confirmed').length;
    }
    if (run.store === 'redis') await repository.clear();
    return stuck;
  } finally {
    await repository.close();
  }
}
