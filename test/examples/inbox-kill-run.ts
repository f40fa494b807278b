/**
 * One SIGKILL run of examples/postgres-inbox/worker.ts against the real servers, shared by its test (PostgreSQL,
 * asserted) and bench/postgres-inbox.ts (PostgreSQL beside Redis, reported):
 *
 * 1. produces `records` payments (a share of them repeating an earlier id, same key and value, as a redelivery
 *    would) to a fresh 3-partition topic, and makes a fresh database schema for `payments` and the marks (the
 *    worker reaches it through `search_path` in DATABASE_URL, so it is configured only as a user would);
 * 2. runs the worker as a child process under a fresh GROUP_ID and SIGKILLs it `kills` times, each a random
 *    0..`maxKillDelayMs` after it showed progress (a new row or a new commit) since its start, restarting it
 *    each time;
 * 3. lets the last worker drain the topic (every partition committed to its end), stops it with SIGTERM and
 *    reads back `payments`.
 *
 * Everything it made (topic, group, schema, the run's Redis keys) is removed at the end, even on failure.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { type Admin, type Kafka, Kafka as KafkaClient, logLevel, Partitioners } from 'kafkajs';
import pg from 'pg';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { committedOffsets, createTopicsAndWait, endOffsets, produce, waitFor } from '../helpers/kafka.js';
import { prng } from '../helpers/random.js';

/** The repository root: the worker runs from there, as its README says. */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WORKER = 'examples/postgres-inbox/worker.ts';
/** The worker's Redis namespace (examples/postgres-inbox/worker.ts). */
const REDIS_PREFIX = 'idem:payments:';

/** Settings of one run. */
export interface KillRunOptions {
  readonly store: 'postgres' | 'redis';
  readonly databaseUrl: string;
  readonly kafkaBrokers: readonly string[];
  readonly redisUrl: string;
  /** Records produced (default 20,000). */
  readonly records?: number;
  /** Share of records that repeat an earlier id (default 0.1). */
  readonly repeatedShare?: number;
  /** SIGKILLs before the drain (default 10). */
  readonly kills?: number;
  /** Longest wait after the worker showed progress before the kill (default 1,000 ms). */
  readonly maxKillDelayMs?: number;
  /**
   * How long the final drain may go without progress (no new row, no new commit) before the run fails (default
   * 60 s). Not a bound on the whole drain: a loaded machine drains slower, and only a stall is a failure.
   */
  readonly stallTimeoutMs?: number;
  readonly seed?: number;
  readonly log?: (line: string) => void;
}

/** What a run left in `payments`. */
export interface KillRunReport {
  readonly store: 'postgres' | 'redis';
  readonly seed: number;
  readonly records: number;
  readonly distinctIds: number;
  readonly kills: number;
  readonly elapsedMs: number;
  /** Rows in `payments`. */
  readonly rows: number;
  /** Ids with more than one row (`HAVING count(*) > 1`), the first few. */
  readonly duplicatedIds: readonly string[];
  /** How many ids have more than one row. */
  readonly duplicatedIdCount: number;
  /** Rows beyond one per id: the payments applied twice. */
  readonly extraRows: number;
  /** Produced ids with no row. */
  readonly missingIds: number;
  /** Rows whose amount is not the one produced for their id. */
  readonly wrongAmounts: number;
  /** The last worker's exit code after SIGTERM. */
  readonly exitCode: number | null;
}

/** The input: `records` payments, a `repeatedShare` of them repeating an earlier id (same value). */
function payments(runTag: string, records: number, repeatedShare: number, random: () => number) {
  const repeats = Math.round(records * repeatedShare);
  const repeatAt = new Set<number>();
  while (repeatAt.size < repeats) repeatAt.add(1 + Math.floor(random() * (records - 1)));
  const amounts = new Map<string, number>();
  const ids: string[] = [];
  const messages: { key: string; value: string }[] = [];
  for (let i = 0; i < records; i++) {
    let id: string;
    if (repeatAt.has(i)) {
      id = ids[Math.floor(random() * ids.length)] as string;
    } else {
      id = `${runTag}-${ids.length}`;
      ids.push(id);
      amounts.set(id, 1 + Math.floor(random() * 100_000));
    }
    messages.push({ key: id, value: JSON.stringify({ id, amount: amounts.get(id) }) });
  }
  return { messages, amounts };
}

/** DATABASE_URL with `search_path` set to `schema`, so the worker's unqualified tables land there. */
function withSearchPath(databaseUrl: string, schema: string): string {
  const url = new URL(databaseUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return url.href;
}

/** A running worker child and what it printed (kept for the failure message). */
class WorkerChild {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  #stderr = '';

  constructor(env: NodeJS.ProcessEnv) {
    this.child = spawn(process.execPath, ['--import', 'tsx', WORKER], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-8_000);
    });
    this.exited = once(this.child, 'exit').then(([code]) => code as number | null);
  }

  get stderr(): string {
    return this.#stderr;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async kill(signal: NodeJS.Signals): Promise<number | null> {
    if (this.running) this.child.kill(signal);
    return this.exited;
  }
}

/** Runs the scenario of the file comment; see {@link KillRunOptions}. */
export async function killRun(options: KillRunOptions): Promise<KillRunReport> {
  const log = options.log ?? (() => undefined);
  const records = options.records ?? 20_000;
  const killsWanted = options.kills ?? 10;
  const maxKillDelayMs = options.maxKillDelayMs ?? 1_000;
  const seed = options.seed ?? randomBytes(4).readUInt32LE();
  const random = prng(seed);
  const runTag = `${options.store}-${randomBytes(5).toString('hex')}`;
  const topic = `idem-inbox-${runTag}`;
  const groupId = `idem-inbox-group-${runTag}`;
  const schema = `inbox_${runTag.replace(/-/g, '_')}`;
  const { messages, amounts } = payments(runTag, records, options.repeatedShare ?? 0.1, random);

  const kafka: Kafka = new KafkaClient({
    clientId: 'idem-inbox-test',
    brokers: [...options.kafkaBrokers],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 5_000,
  });
  const admin: Admin = kafka.admin();
  const db = new pg.Pool({ connectionString: options.databaseUrl, max: 2 });
  const workers: WorkerChild[] = [];
  try {
    await admin.connect();
    await createTopicsAndWait(admin, [{ topic, numPartitions: 3 }]);
    await db.query(`CREATE SCHEMA ${schema}`);
    const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
    try {
      await produce(producer, topic, messages);
    } finally {
      await producer.disconnect();
    }
    const ends = await endOffsets(admin, topic);

    const env: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: withSearchPath(options.databaseUrl, schema),
      KAFKA_BROKERS: options.kafkaBrokers.join(','),
      TOPIC: topic,
      GROUP_ID: groupId,
      IDEM_STORE: options.store,
      REDIS_URL: options.redisUrl,
    };
    const rowCount = async (): Promise<number> => {
      try {
        const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}.payments`);
        return rows[0]?.n ?? 0;
      } catch (error) {
        if ((error as { code?: string }).code === '42P01') return 0; // the worker has not created it yet
        throw error;
      }
    };
    const committedSum = async (): Promise<number> => {
      let sum = 0;
      for (const offset of (await committedOffsets(admin, groupId, topic)).values())
        sum += Math.max(0, offset);
      return sum;
    };
    const drained = async (): Promise<boolean> => {
      const committed = await committedOffsets(admin, groupId, topic);
      return [...ends].every(([p, end]) => end === 0 || committed.get(p) === end);
    };
    const current = () => workers[workers.length - 1] as WorkerChild;
    const failure = (what: string) =>
      new Error(`${what} (seed ${seed}, ${options.store}); the worker's stderr:\n${current().stderr}`);

    const started = Date.now();
    let kills = 0;
    while (kills < killsWanted) {
      const rowsBefore = await rowCount();
      const commitsBefore = await committedSum();
      workers.push(new WorkerChild(env));
      let finished = false;
      await waitFor(
        async () => {
          if (!current().running) throw failure(`the worker exited with ${current().child.exitCode}`);
          if ((await rowCount()) > rowsBefore || (await committedSum()) > commitsBefore) return true;
          finished = await drained();
          return finished;
        },
        { timeoutMs: 60_000, intervalMs: 25, what: () => `worker ${workers.length} to make progress` },
      );
      if (finished) {
        throw failure(`the topic drained after ${kills} kills: too few records for ${killsWanted} kills`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * maxKillDelayMs)));
      await current().kill('SIGKILL');
      kills++;
      const at = ((Date.now() - started) / 1000).toFixed(1);
      log(
        `kill ${kills} at ${at} s: ${await rowCount()} rows, ${await committedSum()} of ${records} committed`,
      );
    }

    workers.push(new WorkerChild(env));
    const stallMs = options.stallTimeoutMs ?? 60_000;
    let progress = '';
    let progressAt = Date.now();
    await waitFor(
      async () => {
        if (!current().running) throw failure(`the worker exited with ${current().child.exitCode}`);
        if (await drained()) return true;
        const now = `${await rowCount()} rows, ${await committedSum()} committed`;
        if (now !== progress) {
          progress = now;
          progressAt = Date.now();
        } else if (Date.now() - progressAt > stallMs) {
          throw failure(
            `the last worker made no progress for ${stallMs / 1000} s draining ${topic} (${now})`,
          );
        }
        return false;
      },
      {
        timeoutMs: 1_800_000,
        intervalMs: 250,
        what: () => `the last worker to drain ${topic} (${progress})`,
      },
    );
    const exitCode = await current().kill('SIGTERM');
    const elapsedMs = Date.now() - started;

    const { rows } = await db.query<{ message_id: string; amount: string }>(
      `SELECT message_id, amount::text AS amount FROM ${schema}.payments`,
    );
    const perId = new Map<string, number>();
    let wrongAmounts = 0;
    for (const row of rows) {
      perId.set(row.message_id, (perId.get(row.message_id) ?? 0) + 1);
      if (Number(row.amount) !== amounts.get(row.message_id)) wrongAmounts++;
    }
    const { rows: duplicated } = await db.query<{ message_id: string }>(
      `SELECT message_id FROM ${schema}.payments GROUP BY message_id HAVING count(*) > 1 ORDER BY message_id`,
    );
    return {
      store: options.store,
      seed,
      records,
      distinctIds: amounts.size,
      kills,
      elapsedMs,
      rows: rows.length,
      duplicatedIds: duplicated.slice(0, 10).map((r) => r.message_id),
      duplicatedIdCount: duplicated.length,
      extraRows: rows.length - perId.size,
      missingIds: [...amounts.keys()].filter((id) => !perId.has(id)).length,
      wrongAmounts,
      exitCode,
    };
  } finally {
    for (const worker of workers) await worker.kill('SIGKILL');
    await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await db.end();
    await admin.deleteGroups([groupId]).catch(() => undefined);
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
    if (options.store === 'redis') await deleteRedisMarks(options.redisUrl, [...amounts.keys()]);
  }
}

/** Removes the run's marks from Redis (its ids are unique to the run; other runs' keys are left alone). */
async function deleteRedisMarks(url: string, ids: readonly string[]): Promise<void> {
  const repository = await RedisRepository.open({ url, keyPrefix: REDIS_PREFIX });
  try {
    for (let i = 0; i < ids.length; i += 1_000) {
      await repository.client.del(...ids.slice(i, i + 1_000).map((id) => repository.redisKey(id)));
    }
  } finally {
    await repository.close();
  }
}
