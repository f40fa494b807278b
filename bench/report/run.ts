/**
 * `npm run bench:report`: runs the benchmarks that need no server, and those whose server answers on its port,
 * each with `--json`, then writes docs/benchmarks.md (figures, same-run ratios against their targets, load
 * average, machine) and docs/benchmarks.svg (the ratios against their targets, drawn from the numbers).
 * Small sizes by default so the report itself stays quick; `--full` runs each bench at its own defaults.
 *
 * `--figures NAME=FILE` takes a bench's figures from a JSON file its own `--json` wrote in a separate run instead
 * of running it (e.g. the growth curve at 1M, 10M and 50M ids, 6–10 min alone here); the report says so under it.
 *
 * `inbox-durable` starts a PostgreSQL and a MariaDB of its own that keep every commit (fsync on; the stack's run
 * without), in a stack dir under IDEM_BENCH_DURABLE_DIR (else the OS temp dir; not a tmpfs, where an fsync is not
 * one) on free ports, and stops them after.
 *
 * The SQL inbox benches (`quiet`) wait first, up to IDEM_BENCH_SETTLE_S seconds (240), for the 1-minute load
 * average to fall to the core count, and print it: the store benches before them leave the machine busy.
 *
 *   npm run bench:report [-- --full] [--only consumer,redis] [--figures rocksdb-growth=FILE] [--out docs]
 */
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type AddressInfo, connect, createServer } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { BenchFigures } from './figures.js';
import { type BenchRun, renderMarkdown } from './markdown.js';
import { ratioChart } from './svg.js';

const { values } = parseArgs({
  options: {
    full: { type: 'boolean', default: false },
    only: { type: 'string' },
    figures: { type: 'string', multiple: true },
    out: { type: 'string', default: 'docs' },
  },
});

/** A bench the report can run: its file, what it needs, and its arguments at report size. */
interface BenchSpec {
  readonly name: string;
  readonly file: string;
  /** Servers that must answer first (`host:port`), and commands that must be on PATH. */
  readonly servers: readonly string[];
  readonly commands?: readonly string[];
  readonly small: readonly string[];
  /** Arguments at every size (a mode, not a size). */
  readonly args?: readonly string[];
  /** Servers the report starts for this bench alone, durable, and points it at (see `durableStack`). */
  readonly durable?: readonly ('postgres' | 'mysql')[];
  /** Runs once the machine is quiet (see `settle`): its rows are round-trip bound, and a busy CPU halves them. */
  readonly quiet?: true;
}

const hostPort = (url: string | undefined, fallback: string) => {
  if (url === undefined) return fallback;
  const parsed = new URL(url.includes('://') ? url : `tcp://${url}`);
  return `${parsed.hostname}:${parsed.port}`;
};
const REDIS = hostPort(process.env.REDIS_URL, '127.0.0.1:6379');
const DYNAMODB = hostPort(process.env.DYNAMODB_ENDPOINT, '127.0.0.1:4567');
const CASSANDRA = (process.env.CASSANDRA_CONTACT_POINTS ?? '127.0.0.1:9042').split(',')[0] as string;
const KAFKA = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',')[0] as string;
const POSTGRES = hostPort(process.env.POSTGRES_URL, '127.0.0.1:5432');
const MYSQL = hostPort(process.env.MYSQL_URL, '127.0.0.1:3306');

/**
 * Every bench with a row in issue 9's table. A bench joins the report once it writes its figures with `--json`
 * (through ./figures.ts); until then it is listed as not machine-readable rather than scraped.
 */
const BENCHES: readonly BenchSpec[] = [
  {
    name: 'consumer',
    file: 'bench/consumer.ts',
    servers: [],
    small: ['--messages', '200000', '--passes', '5'],
  },
  {
    name: 'rocksdb',
    file: 'bench/repositories/rocksdb.ts',
    servers: [],
    small: ['--ids', '200000', '--no-bloom'],
  },
  {
    // Full sizes (1M, 10M, 50M ids) take ~30 min and ~5 GB under the OS temp dir; the report's curve is shorter.
    name: 'rocksdb-growth',
    file: 'bench/repositories/rocksdb-growth.ts',
    servers: [],
    small: ['--sizes', '2e5,1e6,2e6', '--batches', '100'],
  },
  {
    // 3M lines, the low end of issue 22's range: at 300k the run lasts ~2 s, so its "second tenth" RSS was the
    // process still starting (2.3× "growth" that was start-up, not the store).
    name: 'dedup-cli',
    file: 'bench/dedup-cli.ts',
    servers: [],
    small: ['--lines', '3000000'],
  },
  // Its Redis rows need the server; the memory rows carry issue 22's targets.
  { name: 'http', file: 'bench/http.ts', servers: [REDIS], small: ['--seconds', '2', '--rounds', '3'] },
  {
    name: 'redis',
    file: 'bench/repositories/redis.ts',
    servers: [REDIS],
    commands: ['redis-benchmark'],
    small: ['--ids', '30000', '--messages', '2000', '--baseline-requests', '200000'],
  },
  {
    name: 'dynamodb',
    file: 'bench/repositories/dynamodb.ts',
    servers: [DYNAMODB],
    small: ['--seconds', '2', '--rounds', '2', '--batch', '500'],
  },
  {
    name: 'cassandra',
    file: 'bench/repositories/cassandra.ts',
    servers: [CASSANDRA],
    small: ['--ids', '5000', '--sequential', '300', '--concurrency', '128'],
  },
  {
    name: 'postgres',
    file: 'bench/repositories/postgres.ts',
    servers: [POSTGRES],
    small: ['--ids', '20000', '--messages', '1000'],
  },
  {
    name: 'mysql',
    file: 'bench/repositories/mysql.ts',
    servers: [MYSQL],
    small: ['--ids', '20000', '--messages', '1000'],
  },
  {
    // The SQL inbox (issue 34): the transactional mark against a plain transaction, PostgreSQL and MariaDB.
    name: 'inbox',
    file: 'bench/postgres-inbox.ts',
    servers: [POSTGRES, MYSQL],
    quiet: true,
    small: ['--messages', '2000', '--no-kill'],
  },
  {
    // The same rows with every commit kept (issue 34: "report fsync on too"), named "(fsync on)" by `--durable`.
    name: 'inbox-durable',
    file: 'bench/postgres-inbox.ts',
    servers: [],
    durable: ['postgres', 'mysql'],
    quiet: true,
    args: ['--durable', '--no-kill'],
    small: ['--messages', '2000'],
  },
  { name: 'kafka', file: 'bench/kafka.ts', servers: [KAFKA], small: ['--records', '100000'] },
  {
    // The node on the other client (issue 21): judged against the port's own copy on that client (same run),
    // and shown against the plain kafkajs copy; exactly-once runs per-instance, then per-partition.
    name: 'kafka-platformatic',
    file: 'bench/kafka.ts',
    servers: [KAFKA],
    // 300k: at 100k the port copy's measured stretch was 0.3 s, too short to time against the node's.
    small: ['--records', '300000', '--client', 'platformatic', '--only', 'copy,rocksdb,redis,eos'],
  },
  {
    name: 'kafka-catch-up',
    file: 'bench/kafka-catch-up.ts',
    servers: [KAFKA],
    small: ['--records', '600000'],
  },
];

/** True when something accepts a TCP connection at `host:port` within a second. */
function answers(address: string): Promise<boolean> {
  const at = address.lastIndexOf(':');
  return new Promise((done) => {
    const socket = connect({ host: address.slice(0, at), port: Number(address.slice(at + 1)) });
    const finish = (ok: boolean) => {
      socket.destroy();
      done(ok);
    };
    socket.setTimeout(1_000, () => finish(false));
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

const onPath = (command: string) => spawnSync('sh', ['-c', `command -v ${command}`]).status === 0;

/** Why the bench cannot run here, or undefined when it can. */
async function unavailable(spec: BenchSpec): Promise<string | undefined> {
  if (!readFileSync(spec.file, 'utf8').includes('report/figures')) {
    return 'does not write machine-readable figures (`--json`) yet';
  }
  for (const server of spec.servers) if (!(await answers(server))) return `no server answers at ${server}`;
  for (const command of spec.commands ?? []) if (!onPath(command)) return `\`${command}\` is not on PATH`;
  return undefined;
}

/** A port nothing listens on just now. */
function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => done(port));
    });
  });
}

/** Servers the report started for one bench: the environment that points the bench at them, and how to stop them. */
interface DurableStack {
  readonly env: NodeJS.ProcessEnv;
  stop(): void;
}

/**
 * Starts `servers` with scripts/stack/up.sh as a second, durable stack (POSTGRES_FSYNC=on, MYSQL_DURABLE=1) in a
 * stack dir and on ports of its own, so the shared servers are never touched. Returns why not when it cannot.
 */
async function durableStack(servers: readonly ('postgres' | 'mysql')[]): Promise<DurableStack | string> {
  const postgresBin = join(process.env.POSTGRES_BIN_DIR ?? '/usr/lib/postgresql/15/bin', 'postgres');
  // up.sh would apt-get install a missing server: a report does not.
  if (servers.includes('postgres') && !existsSync(postgresBin))
    return `no PostgreSQL server at ${postgresBin}`;
  if (servers.includes('mysql') && !onPath('mariadbd')) return '`mariadbd` is not on PATH';
  const base = process.env.IDEM_BENCH_DURABLE_DIR ?? tmpdir();
  const fsType = spawnSync('stat', ['-f', '-c', '%T', base], { encoding: 'utf8' }).stdout.trim();
  if (fsType === 'tmpfs' || fsType === 'ramfs') {
    return `${base} is a ${fsType}, where an fsync is not one (set IDEM_BENCH_DURABLE_DIR to a dir on a disk)`;
  }
  const dir = mkdtempSync(join(base, 'idem-durable-'));
  // The servers run as their own OS users, who must reach their data under it (mkdtemp makes it 0700).
  chmodSync(dir, 0o755);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
    IDEM_STACK_DIR: dir,
    IDEM_STACK_MODE: 'native',
    IDEM_STACK_STARTED_FILE: '',
    POSTGRES_URL: `postgres://idem:idem@127.0.0.1:${await freePort()}/idem`,
    MYSQL_URL: `mysql://idem:idem@127.0.0.1:${await freePort()}/idem`,
    POSTGRES_FSYNC: 'on',
    MYSQL_DURABLE: '1',
    POSTGRES_TLS: '0',
    MYSQL_TLS: '0',
  };
  const stack = (script: string) =>
    spawnSync('bash', [join('scripts/stack', script), ...servers], { env, stdio: 'inherit' }).status;
  const stop = () => {
    stack('down.sh');
    rmSync(dir, { recursive: true, force: true });
  };
  console.log(
    `\n===== starting durable ${servers.join(' and ')} in ${dir} (data on ${fsType || 'unknown fs'})`,
  );
  const status = stack('up.sh');
  if (status !== 0) {
    stop();
    return `the durable servers did not start (scripts/stack/up.sh exited with ${status})`;
  }
  return { env, stop };
}

/** Longest wait for a quiet machine before a `quiet` bench (IDEM_BENCH_SETTLE_S), in seconds. */
const SETTLE_S = Number(process.env.IDEM_BENCH_SETTLE_S ?? 240);

/**
 * Waits until the 1-minute load average is at most the core count, or {@link SETTLE_S} passed, and prints it:
 * the benches before (Cassandra's, PostgreSQL's and MySQL's stores) leave it at 5-8 on 2 cores, where a round
 * trip waits for a CPU and the SQL inbox rows measure the queue, not the code.
 */
async function settle(name: string): Promise<void> {
  const cores = availableParallelism();
  const started = Date.now();
  const load = () => loadavg()[0] as number;
  console.log(`
===== ${name}: load average (1 min) ${load().toFixed(2)} on ${cores} cores`);
  while (load() > cores && Date.now() - started < SETTLE_S * 1000) {
    await new Promise((resolve) => setTimeout(resolve, 5_000));
  }
  const waited = Math.round((Date.now() - started) / 1000);
  if (waited > 0) {
    const settled = load() <= cores ? 'settled' : `still above ${cores} after the longest wait`;
    console.log(`===== ${name}: waited ${waited} s, load average (1 min) ${load().toFixed(2)}, ${settled}`);
  }
}

/** Runs one bench with `--json`, its output shown live, and returns its figures. */
function runBench(spec: BenchSpec, jsonPath: string, env?: NodeJS.ProcessEnv): Promise<BenchFigures> {
  const args = [
    '--import',
    'tsx',
    spec.file,
    ...(spec.args ?? []),
    ...(values.full ? [] : spec.small),
    '--json',
    jsonPath,
  ];
  console.log(`\n===== ${spec.name}: node ${args.join(' ')}`);
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, args, { stdio: 'inherit', env: env ?? process.env });
    child.once('error', fail);
    child.once('exit', (code) => {
      if (code !== 0) fail(new Error(`${spec.file} exited with code ${code}`));
      else done(JSON.parse(readFileSync(jsonPath, 'utf8')) as BenchFigures);
    });
  });
}

/** `--figures NAME=FILE`: benches whose figures a separate run wrote; a bad one names the flag and the bench. */
function measuredApart(): Map<string, string> {
  const apart = new Map<string, string>();
  for (const item of values.figures ?? []) {
    const at = item.indexOf('=');
    const name = item.slice(0, at);
    if (at < 1 || !BENCHES.some((spec) => spec.name === name)) {
      throw new Error(
        `--figures ${item}: expected NAME=FILE with NAME one of ${BENCHES.map((b) => b.name).join(', ')}`,
      );
    }
    apart.set(name, resolve(item.slice(at + 1)));
  }
  return apart;
}

/** A separate run's figures, checked to be a bench's `--json` output (which bench wrote it is printed). */
function readFigures(spec: BenchSpec, file: string): BenchFigures {
  let figures: BenchFigures;
  try {
    figures = JSON.parse(readFileSync(file, 'utf8')) as BenchFigures;
  } catch (error) {
    throw new Error(`--figures ${spec.name}=${file}: ${error instanceof Error ? error.message : error}`);
  }
  if (!Array.isArray(figures.figures) || !Array.isArray(figures.ratios)) {
    throw new Error(`--figures ${spec.name}=${file}: not a bench's --json output (no figures or ratios)`);
  }
  return figures;
}

async function main(): Promise<void> {
  const only = values.only?.split(',').map((s) => s.trim());
  const apart = measuredApart();
  const scratch = mkdtempSync(join(tmpdir(), 'idem-bench-report-'));
  const runs: BenchRun[] = [];
  const started = new Date();
  try {
    for (const spec of BENCHES) {
      if (only && !only.includes(spec.name)) continue;
      const file = apart.get(spec.name);
      if (file !== undefined) {
        const figures = readFigures(spec, file);
        console.log(
          `\n===== ${spec.name}: figures of ${figures.bench} from a separate run, ${relative(process.cwd(), file)}`,
        );
        runs.push({ name: spec.name, file: spec.file, figures, measuredApart: true });
        continue;
      }
      const reason = await unavailable(spec);
      if (reason !== undefined) {
        console.log(`\n===== ${spec.name}: skipped, ${reason}`);
        runs.push({ name: spec.name, file: spec.file, skipped: reason });
        continue;
      }
      const servers = spec.durable === undefined ? undefined : await durableStack(spec.durable);
      // After the durable servers started, whose start-up is load too.
      if (spec.quiet && typeof servers !== 'string') await settle(spec.name);
      if (typeof servers === 'string') {
        console.log(`\n===== ${spec.name}: skipped, ${servers}`);
        runs.push({ name: spec.name, file: spec.file, skipped: servers });
        continue;
      }
      try {
        runs.push({
          name: spec.name,
          file: spec.file,
          figures: await runBench(spec, join(scratch, `${spec.name}.json`), servers?.env),
        });
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        console.log(`===== ${spec.name}: failed, ${reason}`);
        runs.push({ name: spec.name, file: spec.file, skipped: `failed: ${reason}` });
      } finally {
        servers?.stop();
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  const out = resolve(values.out);
  mkdirSync(out, { recursive: true }); // --out may name a directory that does not exist yet
  const svgPath = join(out, 'benchmarks.svg');
  const mdPath = join(out, 'benchmarks.md');
  const ratios = runs.flatMap((r) => r.figures?.ratios ?? []);
  const curves = runs.flatMap((r) => r.figures?.curves ?? []);
  writeFileSync(
    svgPath,
    ratioChart(ratios, 'idempotent-consumer: same-run ratios against their targets', curves),
  );
  writeFileSync(mdPath, renderMarkdown({ runs, started, full: values.full, chart: 'benchmarks.svg' }));
  console.log(`\nwrote ${relative(process.cwd(), mdPath)} and ${relative(process.cwd(), svgPath)}`);
}

await main();
