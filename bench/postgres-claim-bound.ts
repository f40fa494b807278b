/**
 * The bound of the PostgreSQL inbox's per-message row (issue 34), measured on the server itself, without the
 * consumer: one transaction per message (BEGIN, the payment INSERT, COMMIT) against the same transaction with
 * one more statement of each shape a claim could take, in one run, variants interleaved, best of 5 passes:
 *
 *     node --import tsx bench/postgres-claim-bound.ts        # POSTGRES_URL, default the test stack's
 *
 * - plainLead: BEGIN sent with the INSERT (what a round trip less is worth here);
 * - plainSelect: one more empty round trip (SELECT $1);
 * - secondRow / secondRowOnConflict: the INSERT into a second one-column table (with ON CONFLICT DO NOTHING);
 * - markNoConflict: a plain INSERT into the store's table (`migrate()`), BEGIN in its round trip;
 * - simple / simpleLead: the least claim that never raises a unique violation, INSERT … ON CONFLICT DO NOTHING
 *   RETURNING into the store's table, alone or with BEGIN;
 * - ours / oursLead: the store's one-id claim statement (`claimOne`), alone or with BEGIN (as the store sends it);
 * - oursBeginOnly: the claim with BEGIN but without the lock timeout's SET LOCAL (what that statement costs);
 * - oursBrin / oursNoIndex: the claim into the store's table with its purge index as BRIN, and with none;
 * - batch*: transactions of 100 payment INSERTs (batchPlain) with every id claimed in one statement sent with
 *   BEGIN: a plain multi-row INSERT of the ids (batchBound), the store's claim (batchOurs; batchOursBrin with
 *   the BRIN index). Their ratios are to batchPlain.
 * Prints messages/s and the ratio to plain, and the load average. Asserts nothing.
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import pg from 'pg';
import { sendWithLead } from '../src/repositories/postgres/connection.js';
import { migrate } from '../src/repositories/postgres/index.js';
import { statements } from '../src/repositories/postgres/sql.js';

const url = process.env.POSTGRES_URL ?? 'postgres://idem:idem@127.0.0.1:5432/idem';
const pool = new pg.Pool({ connectionString: url, max: 1 });
const marks = `shape_m_${process.pid}`,
  pay = `shape_p_${process.pid}`;
await migrate({ pool, table: marks });
// The same table with the purge index as BRIN, and with none: what the second index costs a claim.
await migrate({ pool, table: `${marks}_brin` });
await pool.query(`DROP INDEX ${marks}_brin_forget_at`);
await pool.query(`CREATE INDEX ${marks}_brin_forget_at ON ${marks}_brin USING brin (forget_at)`);
await migrate({ pool, table: `${marks}_noidx` });
await pool.query(`DROP INDEX ${marks}_noidx_forget_at`);
await pool.query(`CREATE TABLE ${pay} (id text PRIMARY KEY)`);
await pool.query(`CREATE TABLE ${pay}_2 (id text PRIMARY KEY)`);
const c = await pool.connect();
const claimOne = statements(marks).claimOne;
const ins = (id: string) =>
  c.query({ name: 'ins', text: `INSERT INTO ${pay} (id) VALUES ($1)`, values: [id] });
/** The store's one-id claim into `table`, sent with `lead` (BEGIN and the lock timeout, as the store sends it). */
const claimInto =
  (table: string, lead = ['BEGIN', 'SET LOCAL lock_timeout = 5000']) =>
  async () => {
    const id = randomUUID();
    const { name, text } = statements(table).claimOne;
    await sendWithLead(c, lead, {
      name,
      text,
      values: ['o', null, id, null, null, null, 'confirmed', 1e10, null, null, 1e10],
    });
    await ins(id);
    await c.query('COMMIT');
  };
const variants: Record<string, () => Promise<unknown>> = {
  plain: async () => {
    const id = randomUUID();
    await c.query('BEGIN');
    await ins(id);
    await c.query('COMMIT');
  },
  plainLead: async () => {
    const id = randomUUID();
    await sendWithLead(c, ['BEGIN', 'SET LOCAL lock_timeout = 5000'], {
      name: 'ins',
      text: `INSERT INTO ${pay} (id) VALUES ($1)`,
      values: [id],
    });
    await c.query('COMMIT');
  },
  plainSelect: async () => {
    const id = randomUUID();
    await c.query('BEGIN');
    await c.query({ name: 'sel', text: 'SELECT $1::text', values: [id] });
    await ins(id);
    await c.query('COMMIT');
  },
  secondRow: async () => {
    const id = randomUUID();
    await sendWithLead(c, ['BEGIN'], {
      name: 'ins2',
      text: `INSERT INTO ${pay}_2 (id) VALUES ($1)`,
      values: [id],
    });
    await ins(id);
    await c.query('COMMIT');
  },
  secondRowOnConflict: async () => {
    const id = randomUUID();
    await sendWithLead(c, ['BEGIN'], {
      name: 'ins3',
      text: `INSERT INTO ${pay}_2 (id) VALUES ($1) ON CONFLICT DO NOTHING`,
      values: [id],
    });
    await ins(id);
    await c.query('COMMIT');
  },
  markNoConflict: async () => {
    const id = randomUUID();
    await sendWithLead(c, ['BEGIN'], {
      name: 'mnc',
      text: `INSERT INTO ${marks} (namespace, id, state, expires_at, forget_at) VALUES ('s', $1, 'confirmed', 1e13, 1e13)`,
      values: [id],
    });
    await ins(id);
    await c.query('COMMIT');
  },
  simple: async () => {
    const id = randomUUID();
    await c.query('BEGIN');
    await c.query({
      name: 'simple',
      text: `INSERT INTO ${marks} (namespace, id, state, expires_at, forget_at) VALUES ('s', $1, 'confirmed', 1e13, 1e13) ON CONFLICT DO NOTHING RETURNING id`,
      values: [id],
    });
    await ins(id);
    await c.query('COMMIT');
  },
  simpleLead: async () => {
    const id = randomUUID();
    await sendWithLead(c, ['BEGIN', 'SET LOCAL lock_timeout = 5000'], {
      name: 'simple',
      text: `INSERT INTO ${marks} (namespace, id, state, expires_at, forget_at) VALUES ('s', $1, 'confirmed', 1e13, 1e13) ON CONFLICT DO NOTHING RETURNING id`,
      values: [id],
    });
    await ins(id);
    await c.query('COMMIT');
  },
  oursLead: async () => {
    const id = randomUUID();
    await sendWithLead(c, ['BEGIN', 'SET LOCAL lock_timeout = 5000'], {
      name: claimOne.name,
      text: claimOne.text,
      values: ['o', null, id, null, null, null, 'confirmed', 1e10, null, null, 1e10],
    });
    await ins(id);
    await c.query('COMMIT');
  },
  oursBeginOnly: claimInto(marks, ['BEGIN']),
  oursBrin: claimInto(`${marks}_brin`),
  oursNoIndex: claimInto(`${marks}_noidx`),
  ours: async () => {
    const id = randomUUID();
    await c.query('BEGIN');
    await c.query({
      name: claimOne.name,
      text: claimOne.text,
      values: ['o', null, id, null, null, null, 'confirmed', 1e10, null, null, 1e10],
    });
    await ins(id);
    await c.query('COMMIT');
  },
};

/*
 * Batches of B: BEGIN, B payment INSERTs, COMMIT against the same with every id claimed in one statement that
 * goes with BEGIN: the store's claim (CTE, join back, LATERAL read), the lean multi-row claim (unnest, ON CONFLICT
 * DO UPDATE … WHERE lapsed RETURNING id), and the bound (a plain multi-row INSERT of the ids).
 */
const B = 100;
const claim = statements(marks).claim;
const claimBrin = statements(`${marks}_brin`).claim;
const batchOf = (name: string, text: (ids: string[]) => { text: string; values: unknown[] }) => async () => {
  const ids = Array.from({ length: B }, () => randomUUID());
  await sendWithLead(c, ['BEGIN', 'SET LOCAL lock_timeout = 5000'], { name, ...text(ids) });
  for (const id of ids) await ins(id);
  await c.query('COMMIT');
};
const claimValues = (ids: string[]) => ['o', null, ids, [], [], [], 'confirmed', 1e10, null, null, 1e10];
const batchVariants: Record<string, () => Promise<unknown>> = {
  batchPlain: async () => {
    await c.query('BEGIN');
    for (let i = 0; i < B; i++) await ins(randomUUID());
    await c.query('COMMIT');
  },
  batchBound: batchOf('bbound', (ids) => ({
    text: `INSERT INTO ${marks} (namespace, id, state, expires_at, forget_at) SELECT 'b', u, 'confirmed', 1e13, 1e13 FROM unnest($1::text[]) u`,
    values: [ids],
  })),
  batchOurs: batchOf(claim.name, (ids) => ({ text: claim.text, values: claimValues(ids) })),
  batchOursBrin: batchOf(claimBrin.name, (ids) => ({ text: claimBrin.text, values: claimValues(ids) })),
};

const N = 1500,
  rates: Record<string, number[]> = {};
for (let p = 0; p < 5; p++) {
  for (const [k, f] of Object.entries(variants)) {
    const t = performance.now();
    for (let i = 0; i < N; i++) await f();
    rates[k] = [...(rates[k] ?? []), N / ((performance.now() - t) / 1000)];
  }
  for (const [k, f] of Object.entries(batchVariants)) {
    const t = performance.now();
    for (let i = 0; i < N / B; i++) await f();
    rates[k] = [...(rates[k] ?? []), N / ((performance.now() - t) / 1000)];
  }
}
const best = (a: number[]) => Math.max(...a);
for (const [k, r] of Object.entries(rates)) {
  const base = k.startsWith('batch') ? rates.batchPlain : rates.plain;
  console.log(k.padEnd(20), Math.round(best(r)), (best(r) / best(base as number[])).toFixed(2));
}
console.log(
  'load',
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' '),
);
c.release();
await pool.query(
  `DROP TABLE ${pay}; DROP TABLE ${pay}_2; DROP TABLE ${marks}; DROP TABLE ${marks}_brin; DROP TABLE ${marks}_noidx`,
);
await pool.end();
