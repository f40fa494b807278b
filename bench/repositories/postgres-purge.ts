/**
 * PostgreSQL has no TTL: `PostgresRepository.purge()` deletes expired rows in bounded batches. This fills a fresh
 * table with `--rows` rows whose retention ended (plus `--live` live ones that must survive), then times
 * `purge({ batchSize })` until nothing is due. Prints rows/s, the statements, the load average; asserts nothing
 * about time (only that the purge deleted exactly the expired rows).
 *
 *   node --import tsx bench/repositories/postgres-purge.ts [--rows 1000000] [--live 10000] [--batch 10000]
 *                                                          [--json figures.json]
 */
import { randomUUID } from 'node:crypto';
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { migrate, PostgresRepository } from '../../src/repositories/postgres/index.js';
import { FigureSink } from '../report/figures.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    live: { type: 'string', default: '10000' },
    batch: { type: 'string', default: '10000' },
    json: { type: 'string' },
  },
});
const ROWS = Number(values.rows);
const LIVE = Number(values.live);
const BATCH = Number(values.batch);
const URL_ = process.env.POSTGRES_URL ?? 'postgres://idem:idem@127.0.0.1:5432/idem';
const run = randomUUID().replaceAll('-', '').slice(0, 8);
const TABLE = `idem_bench_purge_${run}`;
/** Rows per fill statement: one unnest INSERT each. */
const FILL_CHUNK = 50_000;
const sink = new FigureSink(
  'postgres-purge',
  `node --import tsx bench/repositories/postgres-purge.ts --rows ${ROWS} --live ${LIVE} --batch ${BATCH}`,
);
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const loadText = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ') + ' (1 / 5 / 15 min)';
const where = (url: string) => {
  const u = new URL(url);
  return `${u.hostname}:${u.port || 5432}${u.pathname}`;
};

/**
 * Inserts `count` rows straight into the table, as a week of confirmed ids whose retention ended a minute ago
 * (`forget_at` in the past) or, `live`, ids kept another hour. Straight SQL, not the repository: the fill is not
 * what is measured, and writing a million rows through claims would take far longer than purging them.
 */
async function fill(pool: pg.Pool, count: number, live: boolean): Promise<void> {
  const offset = live ? 3_600_000 : -60_000;
  for (let from = 0; from < count; from += FILL_CHUNK) {
    const n = Math.min(FILL_CHUNK, count - from);
    await pool.query(
      `INSERT INTO "${TABLE}" (namespace, id, state, expires_at, forget_at)
       SELECT 'bench', $1 || g, 'confirmed', t.at, t.at
       FROM generate_series($2::int, $3::int) AS g,
         (SELECT floor(extract(epoch FROM clock_timestamp()) * 1000) + $4 AS at) AS t`,
      [live ? `live-${run}-` : `order-${run}-`, from, from + n - 1, offset],
    );
  }
}

async function main(): Promise<void> {
  console.log(`postgres ${where(URL_)}; rows ${ROWS} expired + ${LIVE} live, purge batches of ${BATCH}`);
  console.log(`load average at the start: ${loadText()} on ${availableParallelism()} cores`);
  await migrate({ url: URL_, table: TABLE });
  const pool = new pg.Pool({ connectionString: URL_, max: 2 });
  const repository = await PostgresRepository.open({ url: URL_, table: TABLE, namespace: 'bench' });
  try {
    const filling = Date.now();
    await fill(pool, ROWS, false);
    await fill(pool, LIVE, true);
    // Fresh statistics, as autovacuum would have them on a table that grew this big over days.
    await pool.query(`ANALYZE "${TABLE}"`);
    const size = await pool.query(`SELECT pg_size_pretty(pg_total_relation_size('"${TABLE}"')) AS size`);
    console.log(
      `filled in ${((Date.now() - filling) / 1000).toFixed(1)} s; table + index: ${size.rows[0].size}`,
    );

    let statements = 0;
    let deleted = 0;
    const started = process.hrtime.bigint();
    for (;;) {
      // One bounded statement per call, so the loop counts them; purge() alone would loop the same way.
      const n = await repository.purge({ batchSize: BATCH, maxBatches: 1 });
      statements++;
      deleted += n;
      if (n < BATCH) break;
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    const left = await pool.query(`SELECT count(*)::int AS n FROM "${TABLE}"`);
    const rate = deleted / seconds;
    console.log(
      `purged ${fmt(deleted)} rows in ${seconds.toFixed(1)} s: ${fmt(rate)} rows/s ` +
        `(${statements} DELETE statements of at most ${BATCH}, ${((seconds / statements) * 1000).toFixed(0)} ms each)`,
    );
    if (deleted !== ROWS || left.rows[0].n !== LIVE) {
      console.log(
        `  (!) deleted ${deleted} of ${ROWS} expired rows; ${left.rows[0].n} rows left, ${LIVE} live expected`,
      );
      process.exitCode = 1;
    }
    sink.figure(`purge, batches of ${BATCH}, ${fmt(ROWS)} expired rows`, rate, 'rows/s');
    sink.figure('time per DELETE statement', (seconds / statements) * 1000, 'ms');
    sink.note(
      `${fmt(LIVE)} live rows kept; table filled with generate_series, purged with PostgresRepository.purge`,
    );
    sink.write(values.json);
    console.log(`load average at the end: ${loadText()} on ${availableParallelism()} cores`);
  } finally {
    await repository.close();
    await pool.query(`DROP TABLE IF EXISTS "${TABLE}"`);
    await pool.end();
  }
}

await main();
