#!/usr/bin/env node
// Readiness probe for the test stack.
//
//   node scripts/stack/probe.mjs <redis|dynamodb|cassandra|kafka|postgres|mysql> [--wait SECONDS] [--pid PID] [--quiet]
//
// Without --wait: one attempt, exit 0 when the server answers, 1 otherwise.
// With --wait: retries once a second until the server answers (exit 0), the
// deadline passes (exit 2) or the process given by --pid is gone (exit 3).
//
// "Answers" means a real protocol round trip, not an open port:
//   redis     PING -> +PONG                        (REDIS_URL)
//   dynamodb  ListTables                           (DYNAMODB_ENDPOINT)
//   cassandra SELECT release_version FROM system.local (CASSANDRA_CONTACT_POINTS)
//   kafka     admin describeCluster with >= 1 broker   (KAFKA_BROKERS)
//   postgres  SELECT version() as the URL's role, in its database (POSTGRES_URL)
//   mysql     SELECT VERSION() as the URL's user, in its database (MYSQL_URL)
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

// Keep library notices (e.g. the AWS SDK's Node-version warning) out of the
// readiness output.
process.removeAllListeners('warning');
process.on('warning', () => {});

const DEFAULTS = {
  REDIS_URL: 'redis://127.0.0.1:6379',
  DYNAMODB_ENDPOINT: 'http://127.0.0.1:4567',
  CASSANDRA_CONTACT_POINTS: '127.0.0.1:9042',
  KAFKA_BROKERS: '127.0.0.1:9092',
  POSTGRES_URL: 'postgres://idem:idem@127.0.0.1:5432/idem',
  MYSQL_URL: 'mysql://idem:idem@127.0.0.1:3306/idem',
};
const env = (name) => process.env[name] || DEFAULTS[name];
const list = (s) =>
  s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

async function probeRedis() {
  const url = new URL(env('REDIS_URL'));
  const host = url.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = Number(url.port || 6379);
  const password = decodeURIComponent(url.password || '');
  const user = decodeURIComponent(url.username || '');
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host, port });
    let buf = '';
    const fail = (err) => {
      sock.destroy();
      reject(err);
    };
    sock.setTimeout(2000, () => fail(new Error(`redis ${host}:${port}: timeout`)));
    sock.on('error', fail);
    sock.on('connect', () => {
      if (password) {
        const args = user ? ['AUTH', user, password] : ['AUTH', password];
        sock.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
      }
      sock.write('*1\r\n$4\r\nPING\r\n');
    });
    sock.on('data', (d) => {
      buf += d.toString('utf8');
      if (buf.includes('+PONG\r\n')) {
        sock.end();
        resolve(`PONG from ${host}:${port}`);
      } else if (/^-/m.test(buf)) {
        fail(new Error(`redis ${host}:${port}: ${buf.trim()}`));
      }
    });
  });
}

async function probeDynamo() {
  const { DynamoDBClient, ListTablesCommand } = await import('@aws-sdk/client-dynamodb');
  const endpoint = env('DYNAMODB_ENDPOINT');
  const client = new DynamoDBClient({
    endpoint,
    region: process.env.AWS_REGION || 'us-east-1',
    credentials: {
      accessKeyId: process.env.AWS_ACCESS_KEY_ID || 'local',
      secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY || 'local',
    },
    maxAttempts: 1,
  });
  try {
    const out = await withTimeout(
      client.send(new ListTablesCommand({ Limit: 1 })),
      3000,
      `dynamodb ${endpoint}`,
    );
    return `ListTables ok at ${endpoint} (${out.TableNames?.length ?? 0}+ tables)`;
  } finally {
    client.destroy();
  }
}

async function probeCassandra() {
  const { default: cassandra } = await import('cassandra-driver');
  const contactPoints = list(env('CASSANDRA_CONTACT_POINTS'));
  const client = new cassandra.Client({
    contactPoints,
    localDataCenter: process.env.CASSANDRA_LOCAL_DC || 'datacenter1',
    socketOptions: { connectTimeout: 3000, readTimeout: 5000 },
    pooling: { warmup: false },
  });
  try {
    const rs = await withTimeout(
      client.execute('SELECT release_version FROM system.local'),
      8000,
      `cassandra ${contactPoints.join(',')}`,
    );
    return `Cassandra ${rs.first()?.release_version} at ${contactPoints.join(',')}`;
  } finally {
    await client.shutdown().catch(() => {});
  }
}

async function probeKafka() {
  const { Kafka, logLevel } = await import('kafkajs');
  const brokers = list(env('KAFKA_BROKERS'));
  const kafka = new Kafka({
    clientId: 'idem-stack-probe',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 2000,
    requestTimeout: 5000,
    retry: { retries: 0 },
  });
  const admin = kafka.admin();
  try {
    await withTimeout(admin.connect(), 5000, `kafka ${brokers.join(',')}`);
    const c = await withTimeout(admin.describeCluster(), 5000, `kafka ${brokers.join(',')}`);
    if (!c.brokers?.length) throw new Error('kafka: no broker registered yet');
    if (c.controller == null || c.controller < 0) throw new Error('kafka: no active controller yet');
    // Consumer groups usable too: finding a group coordinator creates/loads
    // __consumer_offsets, which otherwise makes the first test's join slow.
    await withTimeout(admin.describeGroups(['idem-stack-probe']), 5000, 'kafka group coordinator');
    return `Kafka cluster ${c.clusterId} (${c.brokers.length} broker(s), controller ${c.controller}) at ${brokers.join(',')}`;
  } finally {
    await admin.disconnect().catch(() => {});
  }
}

// Logging in as the URL's role proves the stack's provisioning (role, password, database),
// not just a listening postmaster. The password never appears in the output.
async function probePostgres() {
  const { default: pg } = await import('pg');
  const url = new URL(env('POSTGRES_URL'));
  const where = `${url.hostname}:${url.port || 5432}${url.pathname}`;
  const client = new pg.Client({ connectionString: url.href, connectionTimeoutMillis: 3000 });
  // An error after connect (server shutting down) must not crash the probe.
  client.on('error', () => {});
  try {
    await withTimeout(client.connect(), 5000, `postgres ${where}`);
    const rs = await withTimeout(client.query('SELECT version() AS v'), 5000, `postgres ${where}`);
    return `${String(rs.rows[0].v).split(' on ')[0]} at ${where}`;
  } finally {
    await client.end().catch(() => {});
  }
}

async function probeMysql() {
  const { default: mysql } = await import('mysql2/promise');
  const url = new URL(env('MYSQL_URL'));
  // Named without the password: this line goes to the stack's logs.
  const where = `${url.hostname}:${url.port || 3306}${url.pathname}`;
  const connection = await withTimeout(
    mysql.createConnection({ uri: url.href, connectTimeout: 3000 }),
    5000,
    `mysql ${where}`,
  );
  try {
    const [rows] = await withTimeout(connection.query('SELECT VERSION() AS v'), 5000, `mysql ${where}`);
    return `MySQL ${rows[0]?.v} at ${where}`;
  } finally {
    // A clean COM_QUIT: a dropped socket would log an "Aborted connection" warning per probe.
    await connection.end().catch(() => connection.destroy());
  }
}

const PROBES = {
  redis: probeRedis,
  dynamodb: probeDynamo,
  cassandra: probeCassandra,
  kafka: probeKafka,
  postgres: probePostgres,
  mysql: probeMysql,
};

function parseArgs(argv) {
  const opts = { name: undefined, wait: 0, pid: 0, quiet: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--wait') opts.wait = Number(argv[++i]);
    else if (a === '--pid') opts.pid = Number(argv[++i]);
    else if (a === '--quiet' || a === '-q') opts.quiet = true;
    else if (!opts.name) opts.name = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!PROBES[opts.name])
    throw new Error(`usage: probe.mjs <${Object.keys(PROBES).join('|')}> [--wait S] [--pid PID]`);
  return opts;
}

const brief = (err) =>
  String(err?.message ?? err)
    .split('\n')[0]
    .slice(0, 300);

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const probe = PROBES[opts.name];
  const started = Date.now();
  const deadline = started + opts.wait * 1000;
  let lastErr;
  for (;;) {
    try {
      const info = await probe();
      if (!opts.quiet) {
        const secs = ((Date.now() - started) / 1000).toFixed(1);
        console.log(`[stack] ${opts.name} ready: ${info}${opts.wait ? ` (waited ${secs}s)` : ''}`);
      }
      return 0;
    } catch (err) {
      lastErr = err;
    }
    if (!opts.wait) {
      if (!opts.quiet) console.error(`[stack] ${opts.name} not answering: ${brief(lastErr)}`);
      return 1;
    }
    if (opts.pid && !alive(opts.pid)) {
      console.error(
        `[stack] ${opts.name}: process ${opts.pid} exited before answering (last error: ${brief(lastErr)})`,
      );
      return 3;
    }
    if (Date.now() >= deadline) {
      console.error(`[stack] ${opts.name}: no answer after ${opts.wait}s (last error: ${brief(lastErr)})`);
      return 2;
    }
    await sleep(1000);
  }
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`[stack] probe error: ${err?.stack ?? err}`);
    process.exit(1);
  },
);
