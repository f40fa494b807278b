/**
 * The plan of every statement the PostgreSQL store prepares (issue 34), on an empty table and at `--rows` rows
 * (default 1,000,000; before ANALYZE, as in the minute after a burst, and after it): each statement's generic
 * plan (what a prepared statement caches once it is chosen, `plan_cache_mode = force_generic_plan`) and its
 * custom plan. A line names each plan's top node and whether it scans the table whole (`Seq Scan` on it).
 *
 *   node --import tsx bench/postgres-plans.ts [--rows 1000000] [--verbose]   # POSTGRES_URL
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { migrate } from '../src/repositories/postgres/index.js';
import { statements } from '../src/repositories/postgres/sql.js';

const { values } = parseArgs({
  options: { rows: { type: 'string', default: '1000000' }, verbose: { type: 'boolean', default: false } },
});
const url = process.env.POSTGRES_URL ?? 'postgres://idem:idem@127.0.0.1:5432/idem';
const pool = new pg.Pool({ connectionString: url, max: 2 });
const table = `plans_${process.pid}`;
const sql = statements(table);
const ids = (n: number) => Array.from({ length: n }, (_, i) => `id-${i * 7919}`);
// Each statement with parameters as the store sends them (a batch of 100 where it takes arrays).
const cases: [string, string, unknown[]][] = [
  [
    'claimNew',
    sql.claimNew.text,
    ['ns', null, 'id-1', null, null, null, 'confirmed', 864e5, null, null, 864e5],
  ],
  [
    'claimOne',
    sql.claimOne.text,
    ['ns', null, 'id-1', null, null, null, 'confirmed', 864e5, null, null, 864e5],
  ],
  ['claim', sql.claim.text, ['ns', null, ids(100), [], [], [], 'confirmed', 864e5, null, null, 864e5]],
  ['read', sql.read.text, ['ns', ids(100), null]],
  ['read (one id)', sql.read.text, ['ns', ids(1), null]],
  ['contains', sql.contains.text, ['ns', ids(100), null]],
  ['confirm', sql.confirm.text, ['ns', ids(100), ids(100), [], 864e5, null]],
  ['renew', sql.renew.text, ['ns', 'id-1', 'o', 30000, null]],
  ['remove', sql.remove.text, ['ns', 'id-1']],
  ['release', sql.release.text, ['ns', 'id-1', 'o']],
  ['clear', sql.clear.text, ['ns']],
  ['scan', sql.scan.text, ['ns', '', 1000]],
  ['purge (not prepared)', sql.purge.text, [1000]],
];

/** The statement's parameters as untyped SQL literals, which EXECUTE casts to each parameter's type. */
function args(client: pg.PoolClient, params: unknown[]): string {
  return params
    .map((v) =>
      v === null
        ? 'NULL'
        : Array.isArray(v)
          ? client.escapeLiteral(`{${v.map((e) => JSON.stringify(e)).join(',')}}`)
          : client.escapeLiteral(String(v)),
    )
    .join(', ');
}

/** One line per plan: whether it reads the table whole, and its nodes. */
async function explain(client: pg.PoolClient, label: string, name: string, params: unknown[]): Promise<void> {
  const { rows } = await client.query(`EXPLAIN EXECUTE ${name}(${args(client, params)})`);
  const plan = rows.map((r) => r['QUERY PLAN'] as string);
  const scans = plan.filter((l) => l.includes(`Seq Scan on ${table}`)).length;
  const nodes = plan
    .map((l) =>
      /(Insert|Update|Delete|Index Only Scan|Index Scan|Bitmap Index Scan|Bitmap Heap Scan|Seq Scan|Tid Scan|Nested Loop|Hash Join|Merge Join|Function Scan|Subquery Scan|Result|Sort|Limit|LockRows)[^(]*/
        .exec(l)?.[0]
        ?.trim(),
    )
    .filter((x) => x !== undefined);
  console.log(`  ${label} ${scans > 0 ? 'FULL SCAN' : 'no full scan'}: ${nodes.join(' > ')}`);
  if (values.verbose) for (const l of plan) console.log(`      ${l}`);
}

/**
 * Generic plans: prepared once on the empty table and cached (`generic`), as a connection's prepared statement
 * keeps its plan until the table's statistics change; made afresh (`generic*`) and custom plans at each stage.
 */
async function plans(client: pg.PoolClient, stage: string): Promise<void> {
  console.log(`\n${stage}:`);
  await client.query('SET plan_cache_mode = force_generic_plan');
  for (const [i, [name, , params]] of cases.entries())
    await explain(client, `generic  ${name.padEnd(22)}`, `cached${i}`, params);
  for (const [i, [name, text, params]] of cases.entries()) {
    await client.query(`PREPARE fresh${i} AS ${text}`);
    await explain(client, `generic* ${name.padEnd(22)}`, `fresh${i}`, params);
  }
  await client.query('SET plan_cache_mode = force_custom_plan');
  for (const [i, [name, , params]] of cases.entries()) {
    await explain(client, `custom   ${name.padEnd(22)}`, `fresh${i}`, params);
    await client.query(`DEALLOCATE fresh${i}`);
  }
}

console.log(
  `load average: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
let client: pg.PoolClient | undefined;
try {
  await migrate({ pool, table });
  await pool.query(`ALTER TABLE ${table} SET (autovacuum_enabled = false)`);
  client = await pool.connect();
  await client.query('SET plan_cache_mode = force_generic_plan');
  for (const [i, [, text, params]] of cases.entries()) {
    await client.query(`PREPARE cached${i} AS ${text}`);
    await client.query(`EXPLAIN EXECUTE cached${i}(${args(client, params)})`);
  }
  await plans(client, 'empty table (never analyzed)');
  const n = Number(values.rows);
  await pool.query(
    `INSERT INTO ${table} (namespace, id, state, expires_at, forget_at, first_seen_at)
     SELECT CASE WHEN g % 10 = 0 THEN 'other' ELSE 'ns' END, 'id-' || g, 'confirmed', 1e13, 1e13 + g, 1e12
     FROM generate_series(1, $1) g`,
    [n],
  );
  await plans(client, `${n} rows, before ANALYZE (autovacuum off on the table)`);
  await pool.query(`ANALYZE ${table}`);
  await plans(client, `${n} rows, after ANALYZE`);
} finally {
  client?.release(true);
  await pool.query(`DROP TABLE IF EXISTS ${table}`);
  await pool.end();
}
