/**
 * The inbox pattern on Kafka and PostgreSQL: a worker that reads payment records (`{"id": "...", "amount": 12}`)
 * and, for each new id, inserts one row into `payments`. With the PostgreSQL store (the default) the id's mark
 * commits in the same transaction as the row, so a SIGKILL at any moment leaves either both or neither, and the
 * redelivery after a restart applies each payment exactly once. `IDEM_STORE=redis` keeps the marks in Redis
 * instead, to show the window this closes: a kill after a row's commit and before the mark's confirm writes
 * that row again.
 *
 *   DATABASE_URL=postgres://idem:idem@127.0.0.1:5432/idem TOPIC=payments GROUP_ID=payments \
 *     node --import tsx examples/postgres-inbox/worker.ts
 *
 * Run from the repository root: it imports the package by its name, as a user does, and in this checkout
 * tsconfig.json's `paths` map that name to the source. README.md beside it lists the variables.
 */
import { pathToFileURL } from 'node:url';
import { IdempotentConsumer, type IdempotentRepository } from 'idempotent-consumer';
import {
  type BlockInfo,
  type IdempotentKafkaConsumer,
  type KafkaRecord,
  kafkaRecordId,
  runIdempotentConsumer,
} from 'idempotent-consumer/kafka';
import { migrate, PostgresRepository, postgresTransaction } from 'idempotent-consumer/postgres';
import { RedisRepository } from 'idempotent-consumer/redis';
import { type Consumer, Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import { createPaymentsTable, insertPayment, parsePayment } from './payments.js';

/** The worker's settings, all from the environment. */
export interface WorkerConfig {
  readonly databaseUrl: string;
  readonly kafkaBrokers: readonly string[];
  readonly topic: string;
  readonly groupId: string;
  /** Where the marks live: PostgreSQL (in the row's transaction) or Redis (beside it). */
  readonly store: 'postgres' | 'redis';
  readonly redisUrl: string;
  /** Where records that are not payments go; without it they are retried (and logged) until one is set. */
  readonly dlqTopic?: string;
}

/** A variable of the environment that is missing or wrong; the message names it and never shows its value. */
export class EnvError extends Error {
  override readonly name = 'EnvError';
  constructor(
    readonly variable: string,
    reason: string,
  ) {
    super(`${variable}: ${reason}`);
  }
}

const KAFKA_NAME = /^[a-zA-Z0-9._-]{1,249}$/;
const BROKER = /^(?:[^\s:,[\]]+|\[[0-9a-fA-F:.]+\]):\d{1,5}$/;

function required(env: NodeJS.ProcessEnv, name: string): string {
  const value = env[name]?.trim();
  if (!value) throw new EnvError(name, 'is required');
  return value;
}

/** Checks a URL's scheme without ever echoing it (it may hold a password). */
function url(env: NodeJS.ProcessEnv, name: string, schemes: readonly string[], fallback?: string): string {
  const value = env[name]?.trim() || fallback;
  if (!value) throw new EnvError(name, 'is required');
  const wanted = schemes.map((s) => `${s}://`).join(' or ');
  let parsed: URL;
  try {
    parsed = new URL(value);
  } catch {
    throw new EnvError(name, `is not a URL (expected ${wanted}...)`);
  }
  if (!schemes.includes(parsed.protocol.slice(0, -1))) throw new EnvError(name, `must be a ${wanted} URL`);
  return value;
}

/** Reads and checks the worker's environment; throws an {@link EnvError} naming the first bad variable. */
export function workerConfig(env: NodeJS.ProcessEnv = process.env): WorkerConfig {
  const store = env.IDEM_STORE?.trim() || 'postgres';
  if (store !== 'postgres' && store !== 'redis')
    throw new EnvError('IDEM_STORE', 'must be postgres or redis');
  const topic = required(env, 'TOPIC');
  if (!KAFKA_NAME.test(topic)) throw new EnvError('TOPIC', 'must be 1-249 of a-z A-Z 0-9 . _ -');
  const brokers = (env.KAFKA_BROKERS?.trim() || '127.0.0.1:9092').split(',').map((b) => b.trim());
  const badBroker = brokers.find((b) => !BROKER.test(b));
  if (badBroker !== undefined) {
    throw new EnvError('KAFKA_BROKERS', `"${badBroker}" is not host:port (a comma-separated list)`);
  }
  const dlqTopic = env.DLQ_TOPIC?.trim() || undefined;
  if (dlqTopic !== undefined && !KAFKA_NAME.test(dlqTopic)) {
    throw new EnvError('DLQ_TOPIC', 'must be 1-249 of a-z A-Z 0-9 . _ -');
  }
  return {
    databaseUrl: url(env, 'DATABASE_URL', ['postgres', 'postgresql']),
    kafkaBrokers: brokers,
    topic,
    groupId: required(env, 'GROUP_ID'),
    store,
    // Checked only where it is used, so a bad REDIS_URL left in the environment does not stop a postgres worker.
    redisUrl: store === 'redis' ? url(env, 'REDIS_URL', ['redis', 'rediss'], 'redis://127.0.0.1:6379') : '',
    ...(dlqTopic === undefined ? {} : { dlqTopic }),
  };
}

/** The URL, or undefined when it is not one (`URL.parse` is Node 22). */
function parseUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    return undefined;
  }
}

/** The URL as it may be printed: its password replaced by `***`. */
export function redactUrl(text: string): string {
  const parsed = parseUrl(text);
  if (!parsed?.password) return text;
  parsed.password = '***';
  return parsed.href;
}

/** Replaces every password of the configured URLs in `text`, in any spelling a library may print it. */
function redactor(config: WorkerConfig): (text: string) => string {
  const secrets = [config.databaseUrl, config.redisUrl]
    .map((u) => parseUrl(u)?.password ?? '')
    .filter((p) => p.length > 0)
    .flatMap((p) => {
      try {
        return [p, decodeURIComponent(p)];
      } catch {
        return [p]; // not valid percent-encoding: printed, if ever, as written
      }
    });
  return (text) => secrets.reduce((out, secret) => out.split(secret).join('***'), text);
}

/** A started worker. */
export interface Worker {
  readonly running: IdempotentKafkaConsumer;
  readonly idempotent: IdempotentConsumer<KafkaRecord>;
  /** Stops consuming (the batch in flight settles and commits), then closes the store and the pool. */
  stop(): Promise<void>;
}

// A handler here takes milliseconds. With Redis, a claim left by a killed worker blocks its id this long.
const LEASE_MS = 10_000;
// Kafka moves a killed worker's partitions once its session lapses: kafkajs' 30 s default would stall every
// restart for that long. A handler heartbeats before each record, so a slow database does not end the session.
const SESSION_TIMEOUT_MS = 10_000;

/** Connects everything and starts consuming; resolves once the consumer runs. */
export async function startWorker(config: WorkerConfig, log: (line: string) => void): Promise<Worker> {
  const redact = redactor(config);
  const pool = new pg.Pool({
    connectionString: config.databaseUrl,
    max: 4,
    application_name: 'postgres-inbox',
  });
  // An idle client whose server went away: the pool replaces it; without a listener it would crash the worker.
  pool.on('error', (error) => log(`database connection lost: ${redact(error.message)}`));
  let repository: IdempotentRepository | undefined;
  try {
    await createPaymentsTable(pool);
    const transactional = config.store === 'postgres';
    if (transactional) {
      // The example makes its own tables; a service would run `idem migrate` (or its DDL) with its migrations.
      await migrate({ pool });
    }
    const store: IdempotentRepository = transactional
      ? await PostgresRepository.open({ pool })
      : await RedisRepository.open({ url: config.redisUrl, keyPrefix: 'idem:payments:' });
    repository = store;
    const onError = (error: unknown, info: BlockInfo) =>
      log(
        `${info.topic}[${info.partition}]@${info.offset} waits (${info.kind}, attempt ${info.attempts}, ` +
          `retry in ${info.retryInMs} ms): ${redact(error instanceof Error ? error.message : String(error))}`,
      );
    const idempotent = new IdempotentConsumer<KafkaRecord>({
      repository: store,
      id: kafkaRecordId,
      // A payment without an id cannot be deduplicated: dead-letter it rather than apply it on every read.
      nullId: 'reject',
      leaseMs: LEASE_MS,
      transaction: transactional ? 'message' : false,
    });
    const running = await runIdempotentConsumer({
      kafka: new Kafka({
        clientId: 'postgres-inbox',
        brokers: [...config.kafkaBrokers],
        logLevel: logLevel.WARN,
      }),
      groupId: config.groupId,
      topics: [config.topic],
      fromBeginning: true,
      id: { from: 'value', path: 'id' },
      idempotent,
      consumerConfig: { sessionTimeout: SESSION_TIMEOUT_MS, heartbeatInterval: 1_000 },
      retry: { maxMs: 5_000 },
      ...(config.dlqTopic === undefined ? {} : { dlq: { topic: config.dlqTopic } }),
      onError,
      handler: async (record, context) => {
        const payment = parsePayment(record.id as string, record.message.value);
        // In a transaction the row commits with its mark; with Redis it commits on its own, before the mark.
        await insertPayment(transactional ? postgresTransaction(context) : pool, payment);
      },
    });
    let stopped: Promise<void> | undefined;
    return {
      running,
      idempotent,
      stop: () => {
        stopped ??= (async () => {
          try {
            await running.stop();
          } finally {
            await store.close();
            await pool.end();
          }
        })();
        return stopped;
      },
    };
  } catch (error) {
    await repository?.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    throw error;
  }
}

async function main(): Promise<void> {
  const say = (line: string) => process.stderr.write(`postgres-inbox: ${line}\n`);
  let config: WorkerConfig;
  try {
    config = workerConfig();
  } catch (error) {
    if (!(error instanceof EnvError)) throw error;
    say(error.message);
    process.exit(2);
  }
  const redact = redactor(config);
  let stopping = false;
  let worker: Worker | undefined;
  const stop = async (signal: string) => {
    if (stopping) {
      say(`${signal} again: exiting now`);
      process.exit(1);
    }
    stopping = true;
    say(`${signal}: stopping (the batch in flight commits first)`);
    try {
      await worker?.stop();
    } catch (error) {
      say(`stop failed: ${redact(error instanceof Error ? error.message : String(error))}`);
      process.exit(1);
    }
    const stats = worker?.idempotent.stats;
    say(`stopped (${stats?.processed ?? 0} payments applied, ${stats?.duplicate ?? 0} duplicates skipped)`);
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));

  try {
    worker = await startWorker(config, say);
  } catch (error) {
    say(`cannot start: ${redact(error instanceof Error ? error.message : String(error))}`);
    process.exit(1);
  }
  // kafkajs restarts its consumer after retriable errors; any other crash ends the worker, for a supervisor
  // to restart it (the committed offsets and the marks make that safe).
  // The adapter types it as a shape (its types never import kafkajs): this worker runs on kafkajs, so cast.
  const consumer = worker.running.consumer as Consumer;
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    if (payload.restart) return;
    say(`consumer crashed: ${redact(payload.error.message)}`);
    process.exit(1);
  });
  say(
    `consuming ${config.topic} as group ${config.groupId}; marks in ${config.store} ` +
      `(${redactUrl(config.store === 'postgres' ? config.databaseUrl : config.redisUrl)})`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
