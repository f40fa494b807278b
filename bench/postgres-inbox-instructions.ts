import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { insertPayment, type Payment } from '../examples/postgres-inbox/payments.js';
import { IdempotentConsumer } from '../src/consumer/index.js';
import { sendWithLead } from '../src/repositories/postgres/connection.js';
import { migrate, PostgresRepository, postgresTransaction } from '../src/repositories/postgres/index.js';
import { statements } from '../src/repositories/postgres/sql.js';
import { cachegrind } from './cachegrind.js';

const ROWS = ['plain', 'bound', 'claim', 'repository', 'consumer'];
const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '3000' },
    rows: { type: 'string', default: ROWS.join(',') },
    child: { type: 'string' },
    schema: { type: 'string' },
  },
});
const postgresUrl = process.env.POSTGRES_URL ?? 'postgres://idem:idem@127.0.0.1:5432/idem';

/** The backend's on-CPU nanoseconds so far (a local server: its /proc); moves with the load, unlike the counts. */
function backendCpu(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]);
}

/** Runs one row in `schema`: warm-up, then `n` messages; prints the backend's CPU per message. */
async function child(row: string, schema: string, warmup: number, n: number): Promise<void> {
  const url = new URL(postgresUrl);
  url.searchParams.set('options', `-c search_path=${schema}`);
  const pool = new pg.Pool({ connectionString: url.href, max: 1 });
  const table = `m_${row.replaceAll('-', '_')}_${n}`;
  await pool.query(
    `CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, message_id text NOT NULL, amount bigint NOT NULL, ` +
      'created_at timestamptz NOT NULL DEFAULT now())',
  );
  await pool.query('CREATE INDEX IF NOT EXISTS payments_message_id ON payments (message_id)');
  await migrate({ pool, table });
  const repository = await PostgresRepository.open({ pool, table });
  const consumer = new IdempotentConsumer<Payment>({ repository, id: 'id', transaction: 'message' });
  const handler = (payment: Payment, context: Parameters<typeof postgresTransaction>[0]) =>
    insertPayment(postgresTransaction(context), payment);
  const { claimNew } = statements(table);
  const markRow = `INSERT INTO ${table} (namespace, id, state, expires_at, forget_at) VALUES ('b', $1, 'confirmed', 1e13, 1e13)`;
  const one = async (work: (client: pg.PoolClient) => Promise<unknown>) => {
    const client = await pool.connect();
    try {
      await work(client);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  const run: Record<string, (payments: Payment[]) => Promise<void>> = {
    plain: async (payments) => {
      for (const payment of payments)
        await one(async (client) => {
          await client.query('BEGIN');
          await insertPayment(client, payment);
        });
    },
    bound: async (payments) => {
      for (const payment of payments)
        await one(async (client) => {
          await sendWithLead(client, ['BEGIN'], { name: 'bound', text: markRow, values: [payment.id] });
          await insertPayment(client, payment);
        });
    },
    claim: async (payments) => {
      for (const payment of payments)
        await one(async (client) => {
          await sendWithLead(client, ['BEGIN', 'SET LOCAL lock_timeout = 5000'], {
            name: claimNew.name,
            text: claimNew.text,
            values: ['', null, payment.id, null, null, null, 'confirmed', 864e5, null, null, 864e5],
          });
          await insertPayment(client, payment);
        });
    },
    repository: async (payments) => {
      for (const payment of payments)
        await repository.transaction(async (transaction) => {
          await repository.add(payment.id, { ttlMs: 864e5 });
          await insertPayment(transaction.client as pg.PoolClient, payment);
        });
    },
    consumer: async (payments) => {
      for (let i = 0; i < payments.length; i += 100)
        await consumer.processBatch(payments.slice(i, i + 100), handler);
    },
  };
  const work = run[row];
  if (work === undefined) throw new Error(`no row ${row}`);
  // Ids counted, not random: the same run counts the same instructions.
  let next = 0;
  const payments = (count: number) =>
    Array.from({ length: count }, () => ({
      id: `00000000-0000-4000-8000-${(next++).toString(16).padStart(12, '0')}`,
      amount: 1 + (next % 1000),
    }));
  await work(payments(warmup));
  const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  const pid = rows[0]?.pid as number;
  const server = backendCpu(pid);
  const cpu = process.cpuUsage();
  await work(payments(n));
  const { user, system } = process.cpuUsage(cpu);
  console.log(JSON.stringify({ row, n, pid, serverNs: backendCpu(pid) - server, clientUs: user + system }));
  await repository.close();
  await pool.end();
}

/**
 * With POSTGRES_CG_DIR: the server itself runs under cachegrind (`valgrind --tool=cachegrind --trace-children=yes
 * --cachegrind-out-file=$POSTGRES_CG_DIR/cg.%p postgres …`), and a backend's count is read once it exited.
 */
async function serverCount(pid: number): Promise<number | undefined> {
  const dir = process.env.POSTGRES_CG_DIR;
  if (dir === undefined) return undefined;
  for (let i = 0; i < 600; i++) {
    try {
      const summary = /^summary:\s+(\d+)/m.exec(readFileSync(join(dir, `cg.${pid}`), 'utf8'));
      if (summary) return Number(summary[1]);
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`no cachegrind summary for backend ${pid}`);
}

/** Instructions cachegrind counted for one child run, and what the child printed. */
async function counted(row: string, schema: string, n: number) {
  const args = ['--child', row, '--schema', schema, '--messages', String(n), '--warmup', values.warmup];
  const { instructions, stdout } = await cachegrind(fileURLToPath(import.meta.url), args, `pg-${row}-${n}`, [
    '--predictable-gc-schedule',
  ]);
  const printed = JSON.parse(stdout.trim().split('\n').at(-1) as string) as { serverNs: number; pid: number };
  return { instructions, serverNs: printed.serverNs, server: await serverCount(printed.pid) };
}

if (values.child !== undefined) {
  await child(values.child, values.schema as string, Number(values.warmup), Number(values.messages));
} else {
  const n = Number(values.messages);
  const load = () =>
    loadavg()
      .map((l) => l.toFixed(2))
      .join(' ');
  console.log(`load average before: ${load()}`);
  console.log(`${values.warmup} warm-up messages, then ${n} and ${2 * n}; per message = difference / ${n}`);
  const admin = new pg.Pool({ connectionString: postgresUrl, max: 1 });
  const rows = values.rows.split(',');
  const perMessage = new Map<string, { instructions: number; serverUs: number; server?: number }>();
  try {
    // One row at a time (each its N and 2N runs at once): the server's CPU figures stay apart.
    for (const row of rows) {
      const schemas = [
        `cg_${process.pid}_${row.replaceAll('-', '_')}_a`,
        `cg_${process.pid}_${row.replaceAll('-', '_')}_b`,
      ];
      for (const s of schemas) await admin.query(`CREATE SCHEMA ${s}`);
      try {
        const [a, b] = await Promise.all([
          counted(row, schemas[0] as string, n),
          counted(row, schemas[1] as string, 2 * n),
        ]);
        perMessage.set(row, {
          instructions: (b.instructions - a.instructions) / n,
          serverUs: (b.serverNs - a.serverNs) / n / 1000,
          ...(a.server === undefined ? {} : { server: ((b.server as number) - a.server) / n }),
        });
        console.log(`  ${row}: ${JSON.stringify(perMessage.get(row))}`);
      } finally {
        for (const s of schemas) await admin.query(`DROP SCHEMA ${s} CASCADE`);
      }
    }
  } finally {
    await admin.end();
  }
  const plain = perMessage.get('plain');
  for (const row of rows) {
    const { instructions, serverUs, server } = perMessage.get(row) as {
      instructions: number;
      serverUs: number;
      server?: number;
    };
    const ratio = plain === undefined ? '' : `  ${(instructions / plain.instructions).toFixed(3)}× plain`;
    console.log(
      `${row.padEnd(11)} ${(instructions / 1000).toFixed(1).padStart(8)} k instructions/message${ratio}` +
        (server === undefined
          ? `   server ${serverUs.toFixed(1)} µs CPU/message`
          : `   server ${(server / 1000).toFixed(1)} k instructions/message`),
    );
  }
  console.log(`load average after:  ${load()}`);
}
