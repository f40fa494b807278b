import { type ChildProcess, fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { RaceInit, RaceReport } from './race-worker.js';

const WORKER = fileURLToPath(new URL('./race-worker.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** A cross-process race: N OS processes claim the same ids against one shared store at the same time. */
export interface RaceOptions {
  /** Store folder under src/repositories (its `repositoryModule` builds the repository). */
  readonly store: string;
  /** Raw options for the store's `optionsSchema` (JSON-serialisable). */
  readonly options: Record<string, unknown>;
  readonly ids: readonly string[];
  readonly workers?: number;
  readonly batchSize?: number;
  readonly mode?: 'eager' | 'lazy';
  readonly ttlMs?: number;
  readonly leaseMs?: number;
  /** Each worker confirms the claims it won (eager mode). */
  readonly confirm?: boolean;
  /** Whole race, start to finish; past it every worker is killed and the race rejects. */
  readonly timeoutMs?: number;
}

/** What one worker reported. */
export interface WorkerResult {
  readonly owner: string;
  readonly won: string[];
  readonly unconfirmed: string[];
  readonly batches: number;
}

/** The race's outcome: per worker, and how many workers won each id. */
export interface RaceResult {
  readonly workers: WorkerResult[];
  /** id → number of workers that claimed it (every input id is present, 0 when nobody won it). */
  readonly claims: Map<string, number>;
}

/**
 * Runs the race. Workers are forked as `node --import tsx test/helpers/race-worker.ts <store> <json>`, connect,
 * then wait behind a barrier until all are ready, so their batches really overlap.
 */
export async function runRace(options: RaceOptions): Promise<RaceResult> {
  const count = options.workers ?? 4;
  const children: ChildProcess[] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`race did not finish within ${options.timeoutMs ?? 120_000} ms`)),
        options.timeoutMs ?? 120_000,
      );
    });
    const runs = Array.from({ length: count }, (_, i) => {
      const child = fork(WORKER, [options.store, JSON.stringify(options.options)], {
        cwd: REPO_ROOT,
        execArgv: ['--import', 'tsx'],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      const owner = `race-worker-${i}`;
      const init: RaceInit = {
        type: 'init',
        ids: options.ids,
        owner,
        batchSize: options.batchSize ?? 500,
        mode: options.mode ?? 'eager',
        ttlMs: options.ttlMs ?? 300_000,
        leaseMs: options.leaseMs ?? 300_000,
        confirm: options.confirm ?? false,
      };
      child.send(init);
      return { child, owner, ...workerReports(child, owner) };
    });
    // The barrier: nobody starts before everybody is connected.
    await Promise.race([Promise.all(runs.map((r) => r.ready)), timeout]);
    for (const run of runs) run.child.send({ type: 'go' });
    const workers = await Promise.race([Promise.all(runs.map((r) => r.done)), timeout]);
    const claims = new Map<string, number>(options.ids.map((id) => [id, 0]));
    for (const worker of workers) {
      for (const id of worker.won) claims.set(id, (claims.get(id) ?? 0) + 1);
    }
    return { workers, claims };
  } finally {
    clearTimeout(timer);
    // Only our own children, by handle; a finished worker has already exited.
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill();
  }
}

/** The ready and done promises of one worker; an error report or an early exit rejects both. */
function workerReports(child: ChildProcess, owner: string) {
  let onReady: () => void = () => {};
  let onDone: (result: WorkerResult) => void = () => {};
  let onFail: (error: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => {
    onReady = resolve;
    onFail = reject;
  });
  const done = new Promise<WorkerResult>((resolve, reject) => {
    onDone = resolve;
    const previous = onFail;
    onFail = (error) => {
      previous(error);
      reject(error);
    };
  });
  // Both may reject before anyone awaits them; the caller sees the error through Promise.all.
  ready.catch(() => {});
  done.catch(() => {});
  child.on('message', (message: RaceReport) => {
    if (message.type === 'ready') onReady();
    else if (message.type === 'done') {
      onDone({ owner, won: message.won, unconfirmed: message.unconfirmed, batches: message.batches });
    } else if (message.type === 'error') onFail(new Error(`${owner} failed: ${message.message}`));
  });
  child.on('exit', (code, signal) =>
    onFail(new Error(`${owner} exited early (code ${code}, signal ${signal})`)),
  );
  child.on('error', (error) => onFail(error));
  return { ready, done };
}

/** Ids that were not claimed exactly once, with their claim counts (empty when the race was clean). */
export function claimedNotOnce(result: RaceResult): [string, number][] {
  return [...result.claims].filter(([, n]) => n !== 1);
}
