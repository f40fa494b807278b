/**
 * PostgreSQL repository throughput against the stack's server (POSTGRES_URL), beside a baseline measured in the
 * same run: a plain `INSERT … SELECT FROM unnest` of the same rows into a table of the same shape, without the
 * claim's conflict handling (what the server does for the cheapest batch write). Prints figures and ratios;
 * asserts nothing.
 *
 *   node --import tsx bench/repositories/postgres.ts [--ids 100000] [--batch 1000] [--messages 5000]
 *                                                    [--json figures.json]
 */
import { randomUUID } from 'node:crypto';
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { migrate, PostgresRepository } from '../../src/repositories/postgres/index.js';
import { FigureSink } from '../report/figures.js';

const { values } = parseArgs({
  options: {
    ids: { type: 'string', default: '100000' },
    batch: { type: 'string', default: '1000' },
    messages: { type: 'string', default: '5000' },
    json: { type: 'string' },
  },
});
const IDS = Number(values.ids);
const BATCH = Number(values.batch);
const MESSAGES = Number(values.messages);
const URL_ = process.env.POSTGRES_URL ?? 'postgres://idem:idem@127.0.0.1:5432/idem';
const run = randomUUID().replaceAll('-', '').slice(0, 8);
const TABLE = `idem_bench_${run}`;
const BASELINE_TABLE = `idem_bench_plain_${run}`;
const TTL_MS = 10 * 60_000;
const WARM_BATCHES = 10;
const sink = new FigureSink(
  'postgres',
  `node --import tsx bench/repositories/postgres.ts --ids ${IDS} --batch ${BATCH} --messages ${MESSAGES}`,
);
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const loadText = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ') + ' (1 / 5 / 15 min)';

interface Row {
  readonly label: string;
  readonly count: number;
  readonly seconds: number;
  readonly unit: string;
}
const rows: Row[] = [];
const rate = (row: Row) => row.count / row.seconds;

async function measure(label: string, unit: string, count: number, body: () => Promise<void>): Promise<Row> {
  const start = process.hrtime.bigint();
  await body();
  const row = { label, unit, count, seconds: Number(process.hrtime.bigint() - start) / 1e9 };
  rows.push(row);
  sink.figure(label, rate(row), `${unit}/s`);
  console.log(`  ${label}: ${fmt(rate(row))} ${unit}/s`);
  return row;
}

const batchesOf = (prefix: string) =>
  Array.from({ length: Math.ceil(IDS / BATCH) }, (_, b) =>
    Array.from({ length: Math.min(BATCH, IDS - b * BATCH) }, (_, i) => `${prefix}-${run}-${b * BATCH + i}`),
  );

/** The baseline: the same rows as a claim batch writes, inserted plainly (one unnest INSERT per batch). */
async function plainInsert(pool: pg.Pool): Promise<Row> {
  await pool.query(`CREATE TABLE "${BASELINE_TABLE}" (LIKE "${TABLE}" INCLUDING ALL)`);
  const text = `INSERT INTO "${BASELINE_TABLE}" (namespace, id, state, expires_at, lease_expires_at, owner, forget_at)
    SELECT 'bench', u.id, 'in-flight', t.at + $2, t.at + 60000, 'bench-worker', t.at + $2
    FROM unnest($1::text[]) AS u(id), (SELECT floor(extract(epoch FROM statement_timestamp()) * 1000) AS at) AS t`;
  const insert = (ids: string[]) => pool.query({ name: `plain-${run}`, text, values: [ids, TTL_MS] });
  const batches = batchesOf('plain');
  for (let i = 0; i < WARM_BATCHES; i++) await insert((batches[0] ?? []).map((id) => `warm-${i}-${id}`));
  return measure(`plain INSERT … unnest (baseline), batches of ${BATCH}`, 'ids', IDS, async () => {
    for (const batch of batches) await insert(batch);
  });
}

async function batchPaths(repository: PostgresRepository): Promise<{ claim: Row; lazy: Row; eager: Row }> {
  const owner = 'bench-worker';
  const claimOptions = { ttlMs: TTL_MS, leaseMs: 60_000, owner };
  const batches = batchesOf('order');
  for (let i = 0; i < WARM_BATCHES; i++) {
    await repository.addMany(
      (batches[0] ?? []).map((id) => ({ id: `warm-${i}-${id}` })),
      claimOptions,
    );
  }
  let claimed = 0;
  const claim = await measure(`addMany eager claims, batches of ${BATCH}`, 'ids', IDS, async () => {
    for (const batch of batches) {
      for (const r of await repository.addMany(
        batch.map((id) => ({ id })),
        claimOptions,
      ))
        if (r.added) claimed++;
    }
  });
  let confirmed = 0;
  const confirm = await measure(`confirmMany, batches of ${BATCH}`, 'ids', IDS, async () => {
    for (const batch of batches) {
      for (const ok of await repository.confirmMany(
        batch.map((id) => ({ id, owner })),
        { ttlMs: TTL_MS },
      ))
        if (ok) confirmed++;
    }
  });
  // Every id again: each is a duplicate, answered with its row (the redelivery path).
  await measure(`addMany of duplicates, batches of ${BATCH}`, 'ids', IDS, async () => {
    for (const batch of batches)
      await repository.addMany(
        batch.map((id) => ({ id })),
        claimOptions,
      );
  });
  const lazyBatches = batchesOf('lazy');
  let marked = 0;
  const check = await measure(`containsMany (lazy check), batches of ${BATCH}`, 'ids', IDS, async () => {
    for (const batch of lazyBatches) await repository.containsMany(batch);
  });
  const mark = await measure(`markMany (lazy mark), batches of ${BATCH}`, 'ids', IDS, async () => {
    for (const batch of lazyBatches) {
      for (const ok of await repository.markMany(
        batch.map((id) => ({ id })),
        { ttlMs: TTL_MS },
      ))
        if (ok) marked++;
    }
  });
  if (claimed !== IDS || confirmed !== IDS || marked !== IDS) {
    console.log(`  (!) claimed ${claimed}, confirmed ${confirmed}, marked ${marked} of ${IDS}`);
  }
  const eager = {
    label: 'eager claim + confirm',
    unit: 'ids',
    count: IDS,
    seconds: claim.seconds + confirm.seconds,
  };
  const lazy = { label: 'lazy check + mark', unit: 'ids', count: IDS, seconds: check.seconds + mark.seconds };
  for (const row of [eager, lazy]) {
    rows.push(row);
    sink.figure(row.label, rate(row), 'ids/s');
    console.log(`  ${row.label}: ${fmt(rate(row))} ids/s`);
  }
  return { claim, lazy, eager };
}

/** `wrap` one message at a time: outside a transaction (claim + confirm) and in one (BEGIN … COMMIT). */
async function perMessage(repository: PostgresRepository): Promise<{ plain: Row; inTransaction: Row }> {
  const paths = (['plain', 'transaction'] as const).map((kind) => {
    const consumer = new IdempotentConsumer<{ id: string }>({
      repository,
      id: 'id',
      ttlMs: TTL_MS,
      transaction: kind === 'plain' ? false : 'message',
    });
    const handle = consumer.wrap(async () => ({ ok: true }));
    return { kind, handle: (i: number) => handle({ id: `msg-${kind}-${run}-${i}` }) };
  });
  for (const path of paths) for (let i = 0; i < 200; i++) await path.handle(-1 - i);
  const [plain, inTransaction] = [
    await measure(
      'IdempotentConsumer.wrap, sequential, no transaction (claim + confirm)',
      'msgs',
      MESSAGES,
      async () => {
        for (let i = 0; i < MESSAGES; i++) await (paths[0] as (typeof paths)[number]).handle(i);
      },
    ),
    await measure(
      'IdempotentConsumer.wrap, sequential, transaction per message',
      'msgs',
      MESSAGES,
      async () => {
        for (let i = 0; i < MESSAGES; i++) await (paths[1] as (typeof paths)[number]).handle(i);
      },
    ),
  ];
  return { plain, inTransaction };
}

async function main(): Promise<void> {
  const u = new URL(URL_);
  console.log(
    `postgres ${u.hostname}:${u.port || 5432}${u.pathname}; ids ${IDS}, batch ${BATCH}, messages ${MESSAGES}`,
  );
  console.log(`load average at the start: ${loadText()} on ${availableParallelism()} cores`);
  await migrate({ url: URL_, table: TABLE });
  const pool = new pg.Pool({ connectionString: URL_, max: 2 });
  const repository = await PostgresRepository.open({ url: URL_, table: TABLE, namespace: 'bench' });
  try {
    console.log('measuring:');
    const baseline = await plainInsert(pool);
    const { claim, lazy, eager } = await batchPaths(repository);
    await perMessage(repository);
    sink.ratio({
      id: 'postgres.eager-claims-vs-plain-insert',
      label: `PostgreSQL batch claims (addMany eager, batches of ${BATCH})`,
      value: rate(claim) / rate(baseline),
      kind: 'min',
      baseline: 'plain INSERT … unnest, same rows, same run',
    });
    sink.ratio({
      id: 'postgres.lazy-vs-eager',
      label: `PostgreSQL lazy batch (containsMany + markMany) vs eager (addMany + confirmMany), batches of ${BATCH}`,
      value: rate(lazy) / rate(eager),
      kind: 'min',
      baseline: 'eager batch, same run',
    });
    const width = Math.max(...rows.map((r) => r.label.length));
    console.log('');
    for (const row of rows) {
      const vs = row.unit === 'ids' ? `${(rate(row) / rate(baseline)).toFixed(2)}× plain INSERT` : '';
      console.log(`${row.label.padEnd(width)}  ${fmt(rate(row)).padStart(10)} ${row.unit}/s  ${vs}`);
    }
    sink.write(values.json);
    console.log(`load average at the end: ${loadText()} on ${availableParallelism()} cores`);
  } finally {
    await repository.close();
    await pool.query(`DROP TABLE IF EXISTS "${TABLE}", "${BASELINE_TABLE}"`);
    await pool.end();
  }
}

await main();
