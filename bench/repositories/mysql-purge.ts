/**
 * MySQL purge throughput against the stack's MariaDB (MYSQL_URL): fills a fresh table with expired rows (1M by
 * default, written directly in multi-row INSERTs, not through the repository, so the fill is not what is
 * measured), a share of live rows beside them, then times `purge()` and prints rows/s, the statements' size and
 * the load average before and after (the machine is shared: the figure means little without it). Asserts nothing
 * about time; checks only that every expired row and no live one was deleted.
 *
 *   node --import tsx bench/repositories/mysql-purge.ts [--rows 1000000] [--live 100000] [--batch 10000]
 */
import { randomUUID } from 'node:crypto';
import { availableParallelism, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { createPool } from 'mysql2/promise';
import { MySqlRepository, migrate } from '../../src/repositories/mysql/index.js';

const { values } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    live: { type: 'string', default: '100000' },
    batch: { type: 'string', default: '10000' },
  },
});
const ROWS = Number(values.rows);
const LIVE = Number(values.live);
const BATCH = Number(values.batch);
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://idem:idem@127.0.0.1:3306/idem';
const table = `idem_bench_purge_${randomUUID().replaceAll('-', '').slice(0, 8)}`;
/** Rows per fill statement: large enough that the fill takes seconds, small enough for max_allowed_packet. */
const FILL_ROWS = 5_000;

const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

async function main(): Promise<void> {
  console.log(`mysql purge: ${ROWS} expired + ${LIVE} live rows, batchSize ${BATCH}, table ${table}`);
  console.log(`cores ${availableParallelism()}, load average ${load()} (1, 5, 15 min) before the fill`);
  await migrate({ url: MYSQL_URL, table });
  const pool = createPool({ uri: MYSQL_URL, connectionLimit: 2 });
  try {
    const fillStarted = performance.now();
    const now = Date.now();
    // Expired rows spread over the last hour (purge walks the forget_at index oldest first), live ones a day out.
    const fill = async (count: number, expired: boolean, offset: number) => {
      for (let from = 0; from < count; from += FILL_ROWS) {
        const n = Math.min(FILL_ROWS, count - from);
        const params: (Buffer | number)[] = [];
        for (let i = 0; i < n; i++) {
          const at = expired
            ? now - 3_600_000 + Math.floor(((from + i) / count) * 3_500_000)
            : now + 86_400_000;
          params.push(Buffer.from(`bench-${offset + from + i}`), at, at);
        }
        await pool.execute(
          `INSERT INTO \`${table}\` (namespace, id, state, expires_at, forget_at, token) VALUES ${new Array(n)
            .fill("('bench', ?, 'confirmed', ?, ?, 0)")
            .join(', ')}`,
          params,
        );
      }
    };
    await fill(ROWS, true, 0);
    await fill(LIVE, false, ROWS);
    const fillSeconds = (performance.now() - fillStarted) / 1000;
    console.log(`filled in ${fillSeconds.toFixed(1)} s (${Math.round((ROWS + LIVE) / fillSeconds)} rows/s)`);

    const repository = await MySqlRepository.open({ url: MYSQL_URL, table, namespace: 'bench', poolSize: 1 });
    try {
      const before = load();
      const started = performance.now();
      const deleted = await repository.purge({ batchSize: BATCH });
      const seconds = (performance.now() - started) / 1000;
      const [rows] = await pool.query(`SELECT COUNT(*) AS n FROM \`${table}\``);
      const left = Number((rows as { n: unknown }[])[0]?.n);
      console.log(
        `purge: ${deleted} rows in ${seconds.toFixed(2)} s = ${Math.round(deleted / seconds)} rows/s ` +
          `(${Math.ceil(deleted / BATCH)} DELETE statements of up to ${BATCH} rows)`,
      );
      console.log(`load average ${before} before the purge, ${load()} after`);
      if (deleted !== ROWS || left !== LIVE) {
        console.log(
          `UNEXPECTED: deleted ${deleted} of ${ROWS} expired rows, ${left} rows left (${LIVE} live)`,
        );
        process.exitCode = 1;
      }
    } finally {
      await repository.close();
    }
  } finally {
    await pool.query(`DROP TABLE IF EXISTS \`${table}\``);
    await pool.end();
  }
}

await main();
