/**
 * What the transactional mark costs the inbox (examples/postgres-inbox), in one run on the stack's PostgreSQL
 * (POSTGRES_URL), and what it buys under SIGKILL (KAFKA_BROKERS, REDIS_URL):
 *
 *     npm run bench:inbox                            # 5,000 messages per pass, 3 passes, then the kill runs
 *     npm run bench:inbox -- --messages 2000 --no-kill
 *     npm run bench:inbox -- --no-postgres --no-kill # the MariaDB rows alone
 *
 * 1. Per message: the example's handler (one INSERT into `payments`) through an IdempotentConsumer on
 *    PostgresRepository with `transaction: 'message'` (BEGIN, claim, INSERT, confirm, COMMIT), against the same
 *    INSERT in a plain transaction without dedup (BEGIN, INSERT, COMMIT). Issue 19's target: ≥ 0.7×.
 * 2. Per batch (`--batch`, default 100 messages a transaction): `transaction: 'batch'` with the per-message
 *    handler (a savepoint around each), and with a whole-batch handler (one multi-row INSERT), each against a
 *    plain transaction making the same INSERTs.
 * 3. MariaDB/MySQL (MYSQL_URL; `--no-mysql` skips, `--no-postgres` runs them alone): the same two rows on
 *    MySqlRepository, a handler making one INSERT on `mysqlTransaction(ctx)` against getConnection + BEGIN + the
 *    same INSERT + COMMIT, and a batch of `--batch` in one transaction against one plain transaction of as many
 *    INSERTs. Targets ≥ 0.7× and ≥ 0.8×.
 *    Each with its bound in the same run: the plain transaction plus one plain INSERT of the mark(s) into the
 *    store's table (per message: sent with BEGIN in one round trip on MariaDB).
 * 4. The SIGKILL run of the example's test (test/examples/inbox-kill-run.ts) with IDEM_STORE=postgres and then
 *    redis: the payment rows applied twice that each leaves (`--kill-records`, `--kills`; `--no-kill` skips).
 *
 * `--durable`: the servers keep every commit (PostgreSQL fsync on, MariaDB innodb_flush_log_at_trx_commit=1; the
 * bench checks and fails otherwise), and every figure and ratio is named "(fsync on)" so the report shows them next
 * to the stack's rows (fsync off, flush every second). `npm run bench:report` starts such servers for it
 * (scripts/stack/lib.sh: POSTGRES_FSYNC=on, MYSQL_DURABLE=1). Either way the servers' settings are noted.
 *
 * Each figure is the best of `--passes` passes after a warm-up, passes of the variants interleaved, every pass
 * on fresh ids (all new: the cost of deduplicating, not the savings on duplicates). Prints messages/s, the
 * ratios and the load average; asserts nothing.
 */
import { randomBytes } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { createPool as createMySqlPool, type PoolConnection } from 'mysql2/promise';
import pg from 'pg';
import {
  createPaymentsTable,
  insertPayment,
  insertPayments,
  type Payment,
} from '../examples/postgres-inbox/payments.js';
import { IdempotentConsumer } from '../src/consumer/index.js';
import {
  MySqlRepository,
  migrate as migrateMySql,
  mysqlTransaction,
} from '../src/repositories/mysql/index.js';
import { sendWithLead } from '../src/repositories/postgres/connection.js';
import { migrate, PostgresRepository, postgresTransaction } from '../src/repositories/postgres/index.js';
import { killRun } from '../test/examples/inbox-kill-run.js';
import { FigureSink } from './report/figures.js';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '5000' },
    batch: { type: 'string', default: '100' },
    passes: { type: 'string', default: '3' },
    'kill-records': { type: 'string', default: '20000' },
    kills: { type: 'string', default: '10' },
    'no-kill': { type: 'boolean', default: false },
    'no-mysql': { type: 'boolean', default: false },
    'no-postgres': { type: 'boolean', default: false },
    durable: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const N = Number(values.messages);
const BATCH = Number(values.batch);
const PASSES = Math.max(1, Number(values.passes));
const postgresUrl = process.env.POSTGRES_URL ?? 'postgres://idem:idem@127.0.0.1:5432/idem';
const kafkaBrokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const mysqlUrl = process.env.MYSQL_URL ?? 'mysql://idem:idem@127.0.0.1:3306/idem';
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');
const durable = values.durable;
// What names the durable run's figures and ratios apart from the stack's (fsync off) ones.
const tag = durable ? ' (fsync on)' : '';
const sink = new FigureSink(
  durable ? 'postgres-inbox-fsync-on' : 'postgres-inbox',
  `npm run bench:inbox -- --messages ${N} --batch ${BATCH} --passes ${PASSES}` +
    (values['no-kill'] ? ' --no-kill' : ` --kill-records ${values['kill-records']} --kills ${values.kills}`) +
    (values['no-mysql'] ? ' --no-mysql' : '') +
    (values['no-postgres'] ? ' --no-postgres' : '') +
    (durable ? ' --durable' : ''),
);
/** Notes a server's durability settings; with `--durable`, fails unless each is what a durable server has. */
function durability(
  server: string,
  settings: Record<string, string>,
  expected: Record<string, string>,
): void {
  const text = Object.entries(settings)
    .map(([name, value]) => `${name}=${value}`)
    .join(', ');
  console.log(`${server}: ${text}`);
  sink.note(`${server}: ${text}`);
  const wrong = Object.entries(expected).filter(([name, value]) => settings[name] !== value);
  if (durable && wrong.length > 0) {
    throw new Error(
      `--durable, but ${server} has ${wrong.map(([name]) => `${name}=${settings[name]}`).join(', ')}`,
    );
  }
}
console.log(`load average at start: ${load()} (1, 5, 15 min)`);

// Everything in a schema of its own, dropped at the end; the pool puts it first on the search_path.
const schema = `bench_inbox_${randomBytes(5).toString('hex')}`;
const admin = new pg.Pool({ connectionString: postgresUrl, max: 1 });
const pgSetting = async (name: string) =>
  ((await admin.query<Record<string, string>>(`SHOW ${name}`)).rows[0]?.[name] ?? '?') as string;
const postgres = !values['no-postgres'];
if (postgres) {
  durability(
    'PostgreSQL',
    {
      fsync: await pgSetting('fsync'),
      full_page_writes: await pgSetting('full_page_writes'),
      synchronous_commit: await pgSetting('synchronous_commit'),
    },
    { fsync: 'on', full_page_writes: 'on', synchronous_commit: 'on' },
  );
  await admin.query(`CREATE SCHEMA ${schema}`);
}
const url = new URL(postgresUrl);
url.searchParams.set('options', `-c search_path=${schema}`);
const pool = new pg.Pool({ connectionString: url.href, max: 4 });
let pass = 0;
/** Fresh payments for one pass: ids never seen before, so every message is new. */
const fresh = (): Payment[] => {
  pass++;
  return Array.from({ length: N }, (_, i) => ({ id: `p${pass}-${i}`, amount: 1 + (i % 1000) }));
};
const chunks = <T>(items: readonly T[]): T[][] =>
  Array.from({ length: Math.ceil(items.length / BATCH) }, (_, i) => items.slice(i * BATCH, (i + 1) * BATCH));

/** BEGIN, `work` on the client, COMMIT: the plain transaction of the baselines. */
async function inTransaction(work: (client: pg.PoolClient) => Promise<void>): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await work(client);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

/** Messages/s of each variant: best of the passes, the variants' passes interleaved. */
async function race(variants: Record<string, (payments: Payment[]) => Promise<void>>): Promise<number[]> {
  const entries = Object.entries(variants);
  const best = entries.map(() => 0);
  for (let p = 0; p <= PASSES; p++) {
    for (const [i, [, run]] of entries.entries()) {
      const payments = fresh();
      const start = process.hrtime.bigint();
      await run(p === 0 ? payments.slice(0, Math.min(N, 500)) : payments); // pass 0 warms up
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      if (p > 0) best[i] = Math.max(best[i] as number, payments.length / seconds);
    }
  }
  for (const [i, [label]] of entries.entries()) {
    console.log(`  ${label.padEnd(64)} ${Math.round(best[i] as number)} msg/s`);
    sink.figure(label + tag, best[i] as number, 'msg/s');
  }
  return best;
}

function ratio(id: string, label: string, value: number, baseline: string, target?: number): void {
  const verdict =
    target === undefined
      ? ''
      : value >= target
        ? `  (target ≥ ${target}: met)`
        : `  (target ≥ ${target}: NOT met)`;
  console.log(`  ${label.padEnd(64)} ${value.toFixed(2)}×${verdict}`);
  sink.ratio({
    id: durable ? `${id}.fsync-on` : id,
    label: label + tag,
    value,
    kind: 'min',
    baseline,
    ...(target === undefined ? {} : { target }),
  });
}

if (postgres) {
  try {
    await createPaymentsTable(pool);
    await migrate({ pool });
    const repository = await PostgresRepository.open({ pool });
    const perMessage = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'message' });
    const perBatch = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'batch' });
    const handler = (payment: Payment, context: Parameters<typeof postgresTransaction>[0]) =>
      insertPayment(postgresTransaction(context), payment);
    // The least a mark in the message's transaction costs: a plain INSERT of its row, in BEGIN's round trip.
    const markRow =
      `INSERT INTO ${repository.table} (namespace, id, state, expires_at, forget_at) ` +
      "VALUES ('bound', $1, 'confirmed', 1e13, 1e13)";
    const markRows =
      `INSERT INTO ${repository.table} (namespace, id, state, expires_at, forget_at) ` +
      "SELECT 'bound', u, 'confirmed', 1e13, 1e13 FROM unnest($1::text[]) u";

    console.log(`\none transaction per message (${N} messages a pass, best of ${PASSES}):`);
    const [plain, marked, boundMessage] = (await race({
      'plain: BEGIN, INSERT, COMMIT': async (payments) => {
        for (const payment of payments) await inTransaction((client) => insertPayment(client, payment));
      },
      "transactional mark: transaction 'message'": async (payments) => {
        for (const chunk of chunks(payments)) await perMessage.processBatch(chunk, handler);
      },
      'bound: BEGIN with one mark INSERT, INSERT, COMMIT': async (payments) => {
        for (const payment of payments) {
          const client = await pool.connect();
          try {
            await sendWithLead(client, ['BEGIN'], {
              name: 'bound_mark',
              text: markRow,
              values: [payment.id],
            });
            await insertPayment(client, payment);
            await client.query('COMMIT');
          } finally {
            client.release();
          }
        }
      },
    })) as [number, number, number];

    console.log(`\none transaction per ${BATCH} messages:`);
    const [plainBatch, markedBatch, boundBatch, plainMulti, markedMulti] = (await race({
      [`plain: BEGIN, ${BATCH} INSERTs, COMMIT`]: async (payments) => {
        for (const chunk of chunks(payments)) {
          await inTransaction(async (client) => {
            for (const payment of chunk) await insertPayment(client, payment);
          });
        }
      },
      "transaction 'batch', per-message handler (savepoints)": async (payments) => {
        for (const chunk of chunks(payments)) await perBatch.processBatch(chunk, handler);
      },
      [`bound: BEGIN, one ${BATCH}-row mark INSERT, ${BATCH} INSERTs, COMMIT`]: async (payments) => {
        for (const chunk of chunks(payments)) {
          await inTransaction(async (client) => {
            await client.query({ name: 'bound_marks', text: markRows, values: [chunk.map((p) => p.id)] });
            for (const payment of chunk) await insertPayment(client, payment);
          });
        }
      },
      [`plain: BEGIN, one ${BATCH}-row INSERT, COMMIT`]: async (payments) => {
        for (const chunk of chunks(payments)) await inTransaction((client) => insertPayments(client, chunk));
      },
      "transaction 'batch', whole-batch handler (one INSERT)": async (payments) => {
        for (const chunk of chunks(payments)) {
          await perBatch.processBatch(chunk, {
            batch: async (items) => {
              const first = items[0];
              if (first === undefined) return;
              await insertPayments(
                postgresTransaction(first.context),
                items.map((item) => item.message),
              );
            },
          });
        }
      },
    })) as [number, number, number, number, number];

    console.log('\nratios (same run):');
    ratio(
      'inbox.message-vs-plain',
      "transaction 'message' / plain transaction",
      marked / plain,
      'plain BEGIN/INSERT/COMMIT',
      0.7,
    );
    // The bound of the row above, in the same run: no claim, no consumer, the same round trips.
    ratio(
      'inbox.message-bound-vs-plain',
      'bound: plain + one mark INSERT with BEGIN / plain transaction',
      boundMessage / plain,
      'plain BEGIN/INSERT/COMMIT',
    );
    ratio(
      'inbox.batch-vs-plain',
      "transaction 'batch' per-message / plain batch",
      markedBatch / plainBatch,
      `plain ${BATCH}-INSERT transaction`,
      0.8,
    );
    // The least any mark in the transaction costs: one plain multi-row INSERT of the batch's ids into the store's
    // table, no claim, no consumer (issue 34 asks for the bound itself, measured in the same run).
    ratio(
      'inbox.batch-bound-vs-plain',
      'bound: plain batch + one multi-row mark INSERT / plain batch',
      boundBatch / plainBatch,
      `plain ${BATCH}-INSERT transaction`,
    );
    ratio(
      'inbox.batch-multi-vs-plain',
      "transaction 'batch' whole-batch / plain multi-row",
      markedMulti / plainMulti,
      `plain ${BATCH}-row INSERT transaction`,
    );
    ratio(
      'inbox.batch-vs-message',
      "transaction 'batch' per-message / 'message'",
      markedBatch / marked,
      "transaction 'message'",
    );
    // A batch transaction with the mark against a plain transaction per message: what an inbox that can take a
    // whole sub-batch's rollback gets, measured against the per-message baseline.
    ratio(
      'inbox.batch-vs-plain-message',
      "transaction 'batch' per-message / plain per-message transaction",
      markedBatch / plain,
      'plain BEGIN/INSERT/COMMIT',
    );
    await repository.close();
  } finally {
    await pool.end();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  }
} else {
  await pool.end();
  await admin.end();
}

if (!values['no-mysql']) {
  // Tables of their own, dropped at the end.
  const suffix = randomBytes(5).toString('hex');
  const table = `bench_inbox_${suffix}`;
  const payments = `bench_payments_${suffix}`;
  const mysqlPool = createMySqlPool({ uri: mysqlUrl, connectionLimit: 4 });
  const insert = (connection: PoolConnection, payment: Payment) =>
    connection.execute(`INSERT INTO ${payments} (message_id, amount) VALUES (?, ?)`, [
      payment.id,
      payment.amount,
    ]);
  /** getConnection, BEGIN, `work`, COMMIT: the plain transaction of the MySQL baselines. */
  const plainMySql = async (work: (connection: PoolConnection) => Promise<void>) => {
    const connection = await mysqlPool.getConnection();
    try {
      await connection.query('BEGIN');
      await work(connection);
      await connection.query('COMMIT');
    } catch (error) {
      await connection.query('ROLLBACK');
      throw error;
    } finally {
      connection.release();
    }
  };
  try {
    const [[flush]] = (await mysqlPool.query(
      'SELECT @@innodb_flush_log_at_trx_commit AS flush',
    )) as unknown as [[{ flush: number }]];
    durability(
      'MariaDB/MySQL',
      { innodb_flush_log_at_trx_commit: String(flush.flush) },
      { innodb_flush_log_at_trx_commit: '1' },
    );
    await mysqlPool.query(
      `CREATE TABLE ${payments} (id bigint AUTO_INCREMENT PRIMARY KEY, message_id varchar(255) NOT NULL, ` +
        'amount bigint NOT NULL) ENGINE=InnoDB',
    );
    await migrateMySql({ url: mysqlUrl, table });
    const repository = await MySqlRepository.open({ url: mysqlUrl, table, poolSize: 4 });
    const perMessage = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'message' });
    const perBatch = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'batch' });
    const handler = (payment: Payment, context: Parameters<typeof mysqlTransaction>[0]) =>
      insert(mysqlTransaction(context), payment);
    // The least a mark in the message's transaction costs: a plain INSERT of its row, in BEGIN's round trip (one
    // prepared compound statement on MariaDB, as the repository sends its lead; two statements on MySQL).
    const markRow =
      `INSERT INTO ${table} (namespace, id, state, expires_at, forget_at, token, first_seen_at) ` +
      "VALUES ('bound', ?, 'confirmed', 1e13, 1e13, 1, 1)";
    const [[version]] = (await mysqlPool.query('SELECT @@version AS version')) as unknown as [
      [{ version: string }],
    ];
    const mariadb = /mariadb/i.test(version.version);
    const beginWithMark = mariadb
      ? (connection: PoolConnection, id: string) =>
          connection.execute(`BEGIN NOT ATOMIC START TRANSACTION; ${markRow}; END`, [id])
      : async (connection: PoolConnection, id: string) => {
          await connection.query('BEGIN');
          return connection.execute(markRow, [id]);
        };
    console.log(`\nMariaDB/MySQL, one transaction per message (${N} messages a pass, best of ${PASSES}):`);
    const [plain, marked, boundMessage] = (await race({
      'mysql plain: BEGIN, INSERT, COMMIT': async (items) => {
        for (const payment of items)
          await plainMySql((connection) => insert(connection, payment).then(() => {}));
      },
      "mysql transactional mark: transaction 'message'": async (items) => {
        for (const chunk of chunks(items)) await perMessage.processBatch(chunk, handler);
      },
      'mysql bound: BEGIN with one mark INSERT, INSERT, COMMIT': async (items) => {
        for (const payment of items) {
          const connection = await mysqlPool.getConnection();
          try {
            await beginWithMark(connection, payment.id);
            await insert(connection, payment);
            await connection.query('COMMIT');
          } finally {
            connection.release();
          }
        }
      },
    })) as [number, number, number];
    console.log(`\nMariaDB/MySQL, one transaction per ${BATCH} messages:`);
    const [plainBatch, markedBatch, boundBatch] = (await race({
      [`mysql plain: BEGIN, ${BATCH} INSERTs, COMMIT`]: async (items) => {
        for (const chunk of chunks(items)) {
          await plainMySql(async (connection) => {
            for (const payment of chunk) await insert(connection, payment);
          });
        }
      },
      "mysql transaction 'batch', per-message handler (savepoints)": async (items) => {
        for (const chunk of chunks(items)) await perBatch.processBatch(chunk, handler);
      },
      [`mysql bound: BEGIN, one ${BATCH}-row mark INSERT, ${BATCH} INSERTs, COMMIT`]: async (items) => {
        for (const chunk of chunks(items)) {
          await plainMySql(async (connection) => {
            await connection.query(
              `INSERT INTO ${table} (namespace, id, state, expires_at, forget_at, token, first_seen_at) VALUES ?`,
              [chunk.map((p) => ['bound', p.id, 'confirmed', 1e13, 1e13, 1, 1])],
            );
            for (const payment of chunk) await insert(connection, payment);
          });
        }
      },
    })) as [number, number, number];
    console.log('\nratios (same run):');
    ratio(
      'inbox.mysql.message-vs-plain',
      "mysql transaction 'message' / plain transaction",
      marked / plain,
      'plain BEGIN/INSERT/COMMIT',
      0.7,
    );
    // The bound of the row above, in the same run: no claim, no consumer, the same round trips.
    ratio(
      'inbox.mysql.message-bound-vs-plain',
      'mysql bound: plain + one mark INSERT with BEGIN / plain transaction',
      boundMessage / plain,
      'plain BEGIN/INSERT/COMMIT',
    );
    ratio(
      'inbox.mysql.batch-vs-plain',
      "mysql transaction 'batch' per-message / plain batch",
      markedBatch / plainBatch,
      `plain ${BATCH}-INSERT transaction`,
      0.8,
    );
    ratio(
      'inbox.mysql.batch-bound-vs-plain',
      'mysql bound: plain batch + one multi-row mark INSERT / plain batch',
      boundBatch / plainBatch,
      `plain ${BATCH}-INSERT transaction`,
    );
    await repository.close();
  } finally {
    await mysqlPool.query(`DROP TABLE IF EXISTS ${payments}`);
    await mysqlPool.query(`DROP TABLE IF EXISTS ${table}`);
    await mysqlPool.end();
  }
}

if (!values['no-kill']) {
  const records = Number(values['kill-records']);
  const kills = Number(values.kills);
  console.log(`\nSIGKILL runs: ${records} records, 10 % repeated ids, ${kills} kills, then drained:`);
  for (const store of ['postgres', 'redis'] as const) {
    const report = await killRun({ store, databaseUrl: postgresUrl, kafkaBrokers, redisUrl, records, kills });
    console.log(
      `  IDEM_STORE=${store.padEnd(8)} ${report.kills} kills, ${(report.elapsedMs / 1000).toFixed(1)} s: ` +
        `${report.rows} rows for ${report.distinctIds} ids, ${report.extraRows} applied twice ` +
        `(${report.duplicatedIdCount} ids), ${report.missingIds} missing (seed ${report.seed})`,
    );
    sink.figure(`SIGKILL run, ${store}: payments applied twice`, report.extraRows, 'rows');
  }
}

console.log(`\nload average at end: ${load()} (1, 5, 15 min)`);
sink.write(values.json);
