/**
 * One worker under chaos, a real process (spawned by ./workers.ts with IPC):
 *
 *   node --import tsx test/chaos/worker.ts '<json WorkerSpec>'
 *
 * It handles every id of the run (`<tag>-0` … `<tag>-<count-1>`, shuffled by its own seed) through
 * `IdempotentConsumer.wrap` in eager mode with lease renewal on, so every id reaches every worker and the
 * consumer's claim decides who applies it. An id answered in-progress (another worker's live claim) or failed
 * (the store did not answer) is delivered again later, as a broker would redeliver it, until this worker sees it
 * processed or a duplicate. The handler waits `handlerMs` (the work), then applies the effect:
 *
 * - `redis`, `postgres`: a line `<id> <worker> <attempt>` appended to this worker's ledger file (an effect outside
 *   the store, so a stale owner resuming after its lease lapsed can apply it a second time);
 * - `postgres-tx`: a row in the ledger table through `postgresTransaction(context)`, in the claim's transaction
 *   (`transaction: 'message'`), so the effect and the mark commit together.
 *
 * It reports `progress` (ids settled so far) every 100 ms and `done` with its counters over IPC, then exits 0.
 */
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { InProgressError } from '../../src/errors.js';
import { PostgresRepository, postgresTransaction } from '../../src/repositories/postgres/index.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { prng, seedOf, shuffle } from '../helpers/random.js';

/** Which store, and where the effect goes. */
export type ChaosStore = 'redis' | 'postgres' | 'postgres-tx';

/** What a worker is told, as JSON in argv. */
export interface WorkerSpec {
  readonly store: ChaosStore;
  /** The store's URL (a private server, or a proxy in front of one). */
  readonly url: string;
  /** Redis key prefix, or PostgreSQL namespace: one per run. */
  readonly namespace: string;
  /** PostgreSQL: the marks table (migrated by the parent). */
  readonly table?: string;
  /** `postgres-tx`: the ledger table `(id text, worker text, attempt int)`, created by the parent. */
  readonly ledgerTable?: string;
  /** `redis`, `postgres`: the ledger file of this worker. */
  readonly ledgerFile?: string;
  readonly worker: string;
  readonly tag: string;
  readonly count: number;
  readonly leaseMs: number;
  readonly handlerMs: number;
  /** Wait before redelivering an id whose store call failed. */
  readonly retryMs: number;
}

/** Worker → parent. */
export type WorkerReport =
  | {
      readonly type: 'progress';
      readonly settled: number;
      readonly inProgress: number;
      readonly storeErrors: number;
      readonly lastError: string | undefined;
    }
  | {
      readonly type: 'done';
      readonly deliveries: number;
      readonly processed: number;
      readonly duplicates: number;
      readonly inProgress: number;
      readonly storeErrors: number;
      readonly claimsLost: number;
      readonly leaseRenewals: number;
      readonly leaseRenewalFailures: number;
      readonly lastError: string | undefined;
    }
  | { readonly type: 'error'; readonly message: string };

const send = (report: WorkerReport) =>
  new Promise<void>((resolve) => {
    if (!process.connected) resolve();
    else process.send?.(report, undefined, {}, () => resolve());
  });

async function openStore(spec: WorkerSpec): Promise<IdempotentRepository> {
  if (spec.store === 'redis') {
    // Short timeouts: a frozen or restarted server answers with an error quickly, and the id is redelivered.
    return RedisRepository.open({
      url: spec.url,
      keyPrefix: `${spec.namespace}:`,
      commandTimeoutMs: 2_000,
      connectTimeoutMs: 2_000,
    });
  }
  return PostgresRepository.open({
    url: spec.url,
    table: spec.table ?? 'processed_ids',
    namespace: spec.namespace,
    poolSize: 3,
    connectTimeoutMs: 2_000,
    statementTimeoutMs: 5_000,
    lockTimeoutMs: 1_000,
  });
}

async function main(): Promise<void> {
  const spec = JSON.parse(process.argv[2] ?? '') as WorkerSpec;
  const repository = await openStore(spec);
  const transactional = spec.store === 'postgres-tx';
  const consumer = new IdempotentConsumer<{ id: string }>({
    repository,
    id: 'id',
    mode: 'eager',
    leaseMs: spec.leaseMs,
    transaction: transactional ? 'message' : false,
    onWarning: () => undefined, // renewal failures are counted in stats; the parent reads the counters
  });
  const attempts = new Map<string, number>();
  const handle = consumer.wrap(async (message, context) => {
    const attempt = (attempts.get(message.id) ?? 0) + 1;
    attempts.set(message.id, attempt);
    if (spec.handlerMs > 0) await sleep(spec.handlerMs);
    if (transactional) {
      await postgresTransaction(context).query(
        `INSERT INTO ${spec.ledgerTable} (id, worker, attempt) VALUES ($1, $2, $3)`,
        [message.id, spec.worker, attempt],
      );
    } else {
      appendFileSync(spec.ledgerFile as string, `${message.id} ${spec.worker} ${attempt}\n`);
    }
  });

  const ids = Array.from({ length: spec.count }, (_, i) => `${spec.tag}-${i}`);
  const queue = shuffle(ids, prng(seedOf(spec.worker)));
  let settled = 0;
  let deliveries = 0;
  let inProgress = 0;
  let storeErrors = 0;
  let lastError: string | undefined;
  // Ids answered in-progress one after the other: when every id left is someone else's claim, wait a little.
  let busyInARow = 0;
  const progress = setInterval(
    () => void send({ type: 'progress', settled, inProgress, storeErrors, lastError }),
    100,
  );
  try {
    while (queue.length > 0) {
      const id = queue.shift() as string;
      deliveries++;
      try {
        await handle({ id });
        settled++;
        busyInARow = 0;
      } catch (error) {
        queue.push(id);
        if (error instanceof InProgressError) {
          inProgress++;
          if (++busyInARow >= queue.length) {
            busyInARow = 0;
            await sleep(50);
          }
        } else {
          storeErrors++;
          lastError = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
          await sleep(spec.retryMs);
        }
      }
    }
  } finally {
    clearInterval(progress);
  }
  const { stats } = consumer;
  await send({
    type: 'done',
    deliveries,
    processed: stats.processed,
    duplicates: stats.duplicate,
    inProgress,
    storeErrors,
    claimsLost: stats.claimsLost,
    leaseRenewals: stats.leaseRenewals,
    leaseRenewalFailures: stats.leaseRenewalFailures,
    lastError,
  });
  await repository.close();
}

main().then(
  () => process.disconnect?.(),
  async (error: unknown) => {
    await send({
      type: 'error',
      message: error instanceof Error ? (error.stack ?? error.message) : String(error),
    });
    process.exitCode = 1;
    process.disconnect?.();
  },
);
