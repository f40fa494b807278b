/**
 * The bound of the MariaDB inbox's per-message row (issue 34), measured on the server itself, without the
 * consumer: one transaction per message (BEGIN, the payment INSERT, COMMIT) against the same transaction with
 * one more statement of each shape a claim could take, in one run, variants interleaved, best of 5 passes:
 *
 *     node --import tsx bench/mysql-claim-bound.ts        # MYSQL_URL (default the test stack's MariaDB),
 *                                                          # BOUND_MESSAGES a pass (default 1500)
 *
 * One connection; every extra statement goes ahead of the payment INSERT in the round trip that opens the
 * transaction (MariaDB's anonymous compound statement, `BEGIN NOT ATOMIC … END`, prepared), so that no variant
 * but `plainSelect` costs a round trip more than plain:
 *
 * - plain: BEGIN, the INSERT, COMMIT (text BEGIN/COMMIT, the INSERT prepared: the inbox bench's baseline);
 * - plainCompound: BEGIN as a compound block doing only START TRANSACTION (what the block itself costs);
 * - plainSelect: one more empty round trip (SELECT ?);
 * - secondRow: an INSERT into a second one-column table, in the block with START TRANSACTION;
 * - markPlain: a plain INSERT of a mark into the store's table (`migrate()`), likewise;
 * - markUpsert: INSERT … ON DUPLICATE KEY UPDATE of it, the least statement that takes over a lapsed row and never
 *   raises a duplicate-key error (which a takeover needs: a plain INSERT's shared lock then an UPDATE can deadlock);
 * - leastSafe: markUpsert with what detects the server's own rollback (autocommit off and the transaction's
 *   savepoint, released in the end's block with autocommit back, which commits): the least claim with the store's
 *   guarantees;
 * - mainClaim: the store's start as main sent it: the session settings, the savepoint, the whole one-row claim and
 *   a SELECT of its time (a result set); the end as the store sends it;
 * - mainTracked: mainClaim with the time in the OK packet (session tracking) instead of the SELECT;
 * - claimInBlock: the store's start as it sends it now (`Statements.claimInBlock`: on a new id only the insert and
 *   the token's assignment, the time tracked); the end the same.
 * Prints messages/s and the ratio to plain, and the load average. Asserts nothing.
 */
import { randomUUID } from 'node:crypto';
import { loadavg, uptime } from 'node:os';
import { createConnection } from 'mysql2/promise';
import { migrate } from '../src/repositories/mysql/index.js';
import {
  statements as mysqlStatements,
  quoteTable,
  TRACK_LAST_INSERT_ID,
} from '../src/repositories/mysql/sql.js';

const url = process.env.MYSQL_URL ?? 'mysql://idem:idem@127.0.0.1:3306/idem';
const N = Number(process.env.BOUND_MESSAGES ?? 1500);
const PASSES = 5;
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
console.log(`load average at start: ${load()} (uptime ${Math.round(uptime())} s)`);
const c = await createConnection({ uri: url, supportBigNumbers: true, maxPreparedStatements: 512 });
const marks = `bound_m_${process.pid}`,
  pay = `bound_p_${process.pid}`,
  two = `bound_2_${process.pid}`;
await migrate({ url, table: marks });
await c.query(
  `CREATE TABLE ${pay} (id bigint AUTO_INCREMENT PRIMARY KEY, message_id varchar(255) NOT NULL, ` +
    'amount bigint NOT NULL) ENGINE=InnoDB',
);
await c.query(`CREATE TABLE ${two} (id varbinary(255) PRIMARY KEY) ENGINE=InnoDB`);
const statements = mysqlStatements(marks);
const claim1 = statements.claim(1, true);
// The claim's time in the OK packet, as the store's own pool sets it on each connection.
await c.query(TRACK_LAST_INSERT_ID);
const m = quoteTable(marks);
const ins = (id: string) => c.execute(`INSERT INTO ${pay} (message_id, amount) VALUES (?, ?)`, [id, 1]);
const block = (...parts: string[]) => `BEGIN NOT ATOMIC ${parts.join('; ')}; END`;
const settings = 'SET @idem_autocommit = @@SESSION.autocommit, SESSION autocommit = 0';
const savepoint = 'SAVEPOINT idempotent_consumer_transaction';
const end = block(
  'RELEASE SAVEPOINT idempotent_consumer_transaction',
  'SET SESSION autocommit = @idem_autocommit',
);
const ns = Buffer.from('bound');
/** The claim's parameters as the store passes them for a one-row confirmed mark. */
const claimParams = (id: string) => [
  ...[ns, Buffer.from(id), 'confirmed', null, 86_400_000, null, null, null, null, null, null, 86_400_000],
  ...[Math.floor(Math.random() * 2 ** 40), null, null],
];
const markRow = `INSERT INTO ${m} (namespace, id, state, expires_at, forget_at, token) VALUES (?, ?, 'confirmed', FLOOR(@@timestamp * 1000) + 86400000, FLOOR(@@timestamp * 1000) + 86400000, ?)`;
const upsert =
  `${markRow} ON DUPLICATE KEY UPDATE token = IF(expires_at <= FLOOR(@@timestamp * 1000), VALUES(token), token), ` +
  'expires_at = IF(token = VALUES(token), VALUES(expires_at), expires_at)';
const markParams = (id: string) => [ns, Buffer.from(id), Math.floor(Math.random() * 2 ** 40)];

const variants: Record<string, () => Promise<unknown>> = {
  plain: async () => {
    const id = randomUUID();
    await c.query('BEGIN');
    await ins(id);
    await c.query('COMMIT');
  },
  plainCompound: async () => {
    const id = randomUUID();
    await c.execute(block('START TRANSACTION'));
    await ins(id);
    await c.query('COMMIT');
  },
  plainSelect: async () => {
    const id = randomUUID();
    await c.query('BEGIN');
    await c.execute('SELECT ?', [id]);
    await ins(id);
    await c.query('COMMIT');
  },
  secondRow: async () => {
    const id = randomUUID();
    await c.execute(block('START TRANSACTION', `INSERT INTO ${two} (id) VALUES (?)`), [id]);
    await ins(id);
    await c.query('COMMIT');
  },
  markPlain: async () => {
    const id = randomUUID();
    await c.execute(block('START TRANSACTION', markRow), markParams(id));
    await ins(id);
    await c.query('COMMIT');
  },
  markUpsert: async () => {
    const id = randomUUID();
    await c.execute(block('START TRANSACTION', upsert), markParams(id));
    await ins(id);
    await c.query('COMMIT');
  },
  leastSafe: async () => {
    const id = randomUUID();
    await c.execute(block(settings, savepoint, upsert), markParams(id));
    await ins(id);
    await c.execute(end);
  },
  mainClaim: async () => {
    const id = randomUUID();
    await c.execute(block(settings, savepoint, claim1, 'SELECT LAST_INSERT_ID() AS at'), claimParams(id));
    await ins(id);
    await c.execute(end);
  },
  mainTracked: async () => {
    const id = randomUUID();
    await c.execute(
      block(settings, savepoint, claim1, 'SET SESSION last_insert_id = LAST_INSERT_ID()'),
      claimParams(id),
    );
    await ins(id);
    await c.execute(end);
  },
  claimInBlock: async () => {
    const params = claimParams(randomUUID());
    await c.execute(block(settings, savepoint, statements.claimInBlock), params);
    await ins(String(params[1]));
    await c.execute(end);
  },
};
const rates: Record<string, number[]> = {};
try {
  for (const f of Object.values(variants)) for (let i = 0; i < 50; i++) await f(); // warm-up, prepares
  for (let p = 0; p < PASSES; p++)
    for (const [k, f] of Object.entries(variants)) {
      const t = performance.now();
      for (let i = 0; i < N; i++) await f();
      rates[k] = [...(rates[k] ?? []), N / ((performance.now() - t) / 1000)];
    }
  const best = (a: number[]) => Math.max(...a);
  const plain = best(rates.plain as number[]);
  for (const [k, r] of Object.entries(rates))
    console.log(k.padEnd(14), String(Math.round(best(r))).padStart(6), 'msg/s', (best(r) / plain).toFixed(2));
  console.log(`load average at end: ${load()}`);
} finally {
  await c.query(`DROP TABLE IF EXISTS ${pay}, ${two}, ${marks}`);
  await c.end();
}
