/**
 * Fast catch-up of the Kafka→Kafka dedup node after a restart far behind, in one run on the stack's broker
 * (KAFKA_BROKERS, REDIS_URL):
 *
 *     npm run bench:catch-up                       # 1M-record backlog, RocksDB
 *     npm run bench:catch-up -- --records 200000   # quicker
 *     npm run bench:catch-up -- --cpu-prof prof/   # also writes a CPU profile of each restart
 *
 * 1. Pre-fills a 3-partition topic with a warm-up (10k records); the node runs over it twice, once per variant
 *    (own group, own store, own output), and is stopped: both have committed offsets and a warm store.
 * 2. Produces the backlog (1M JSON records, 10% duplicates) while the nodes are down.
 * 3. The plain kafkajs copy of bench/kafka.ts over the topic (the baseline); `bound`: the plain copy through the
 *    package's Kafka port on the node's own client, in requests of the ordinary and of the catch-up chunk, the
 *    faster counting (no parsing, store or DLQ: the fastest any catch-up on one thread could go); then each variant restarted: `ordinary` (catchUp.enabled =
 *    false: the steady-state node's path) and `catch-up`; then the kafkajs copy again (the load of a shared box
 *    drifts; the baseline is the mean of both copies).
 * With `--only …,workers`, also a restart as two nodes on two worker threads of this process (one group, each
 * worker its own RocksDB store and half the partitions): what processing independent partitions in parallel
 * gains on this machine.
 * Prints, per run, the time from the restart to zero lag, records/s from the first record to the last, the
 * ratios to the ordinary node and to the copy, CPU per record and CPU use (1.0 = one core busy), and the load
 * average. Asserts nothing.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { openRepository } from '../src/config/repository.js';
import { catchUpDefaults } from '../src/node/catch-up.js';
import { startDedupNode } from '../src/node/dedup-node.js';
import { type NodeConfig, nodeConfigSchema, nodeDefaults } from '../src/node/options.js';
import { type PerfSummary, PHASES, type Phase } from '../src/node/perf-log.js';
import { copy, measure, portCopy, prefill, type Result } from './kafka.js';
import { FigureSink } from './report/figures.js';

const { values } = parseArgs({
  ...(isMainThread ? {} : { args: [] }),
  options: {
    records: { type: 'string', default: '1000000' },
    warmup: { type: 'string', default: '10000' },
    duplicates: { type: 'string', default: '0.1' },
    'batch-size': { type: 'string', default: String(nodeDefaults.batchSize) },
    'catch-up-batch-size': { type: 'string', default: String(catchUpDefaults.batchSize) },
    /** Default: the config default, or half a partition's backlog when that is smaller (small runs). */
    'lag-threshold': { type: 'string' },
    repository: { type: 'string', default: 'rocksdb' },
    only: { type: 'string', default: 'copy,bound,ordinary,catch-up' },
    /** A directory: writes `<run>.cpuprofile` for each restart (open in Chrome DevTools or speedscope). */
    'cpu-prof': { type: 'string' },
    /** Write the figures and ratios as JSON (for `npm run bench:report`). */
    json: { type: 'string' },
  },
});
const RECORDS = Number(values.records);
const WARMUP = Number(values.warmup);
const DUPLICATE_SHARE = Number(values.duplicates);
const BATCH_SIZE = Number(values['batch-size']);
const PARTITIONS = 3;
const LAG_THRESHOLD = Number(
  values['lag-threshold'] ?? Math.min(catchUpDefaults.lagThreshold, Math.floor(RECORDS / PARTITIONS / 2)),
);
const CATCH_UP_BATCH_SIZE = Number(values['catch-up-batch-size']);
const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const runs = new Set(values.only.split(','));

const suffix = Math.random().toString(36).slice(2, 8);
const kafka = new Kafka({ clientId: 'idem-bench-catch-up', brokers: BROKERS, logLevel: logLevel.NOTHING });
const admin = kafka.admin();
const topics: string[] = [];

/** A restart measured to zero lag. */
interface Restart extends Result {
  /** From the restart call to the last backlog record handled. */
  readonly secondsToZero: number;
  /** CPU seconds of this process per wall second while handling the backlog (1.0 = one core busy). */
  readonly cpuUse: number;
  readonly catchUpLines: string[];
}

/** A node variant: its own group, store and output, so both restart from the same place. */
interface Variant {
  readonly name: 'ordinary' | 'catch-up' | 'workers';
  readonly config: NodeConfig;
  readonly cleanup: () => Promise<void>;
}

async function createTopic(name: string): Promise<string> {
  await admin.createTopics({ topics: [{ topic: name, numPartitions: PARTITIONS }], waitForLeaders: true });
  topics.push(name);
  return name;
}

async function variant(name: Variant['name'], input: string): Promise<Variant> {
  const output = await createTopic(`idem-bench-cu-out-${name}-${suffix}`);
  let repository: Record<string, unknown>;
  let cleanup: () => Promise<void>;
  if (values.repository === 'redis') {
    repository = { type: 'redis', url: REDIS_URL, keyPrefix: `idem-bench-cu-${name}-${suffix}:` };
    cleanup = async () => {
      const store = await openRepository({ repository: repository as never });
      await store.clear();
      await store.close();
    };
  } else {
    const dir = await mkdtemp(join(tmpdir(), `idem-bench-cu-${name}-`));
    repository = { type: 'rocksdb', path: dir };
    cleanup = () => rm(dir, { recursive: true, force: true });
  }
  const config = nodeConfigSchema.parse({
    kafka: { brokers: BROKERS, clientId: `idem-bench-cu-${name}` },
    input: { topic: input, groupId: `idem-bench-cu-${name}-${suffix}`, batchSize: BATCH_SIZE },
    output: { topic: output },
    dlq: { topic: `idem-bench-cu-dlq-${suffix}` },
    dedup: { id: 'uid' },
    repository,
    metrics: { enabled: false },
    catchUp: {
      enabled: name !== 'ordinary',
      lagThreshold: LAG_THRESHOLD,
      batchSize: CATCH_UP_BATCH_SIZE,
    },
  });
  return { name, config, cleanup };
}

/** Runs the node until it has handled `total` records; returns what its log said. */
async function runNode(
  config: NodeConfig,
  total: number,
  label: string,
  profile?: string,
): Promise<Omit<Restart, 'name'>> {
  const summaries: PerfSummary[] = [];
  const catchUpLines: string[] = [];
  const logger = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        const entry = JSON.parse(line) as {
          perf?: PerfSummary;
          catchUp?: unknown;
          level: number;
          msg: string;
        };
        if (entry.perf) summaries.push(entry.perf);
        else if (entry.catchUp || /catch/.test(entry.msg)) catchUpLines.push(entry.msg);
        else if (entry.level >= 40) log(`  [${label}] ${entry.msg}`);
      },
    },
  );
  const session = profile === undefined ? undefined : new Session();
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 500 });
    await session.post('Profiler.start');
  }
  const repository = await openRepository(config);
  const restartAt = performance.now();
  const handle = await startDedupNode(config, repository, logger);
  const m = await measure(() => handle.totals().recordsIn, total);
  const out = handle.totals().recordsOut;
  const stopAt = performance.now();
  if (session && profile) {
    const { profile: data } = await session.post('Profiler.stop');
    await writeFile(profile, JSON.stringify(data));
    session.disconnect();
    log(`  [${label}] CPU profile: ${profile}`);
  }
  await handle.stop();
  const phases = Object.fromEntries(PHASES.map((p) => [p, 0])) as Record<Phase, number>;
  for (const s of summaries) for (const p of PHASES) phases[p] += s.phases[p].seconds;
  phases.poll = Math.max(0, phases.poll - (m.firstAt - restartAt + (stopAt - m.lastAt)) / 1000);
  return {
    recordsPerSecond: m.perSecond,
    seconds: m.seconds,
    secondsToZero: (m.lastAt - restartAt) / 1000,
    out,
    cpuMicrosPerRecord: m.cpuMicrosPerRecord,
    cpuUse: (m.cpuMicrosPerRecord * m.perSecond) / 1e6,
    phases,
    catchUpLines,
  };
}

/** What the main thread hands a worker: its node's config (a store of its own). */
interface WorkerInput {
  readonly config: NodeConfig;
  /** Its slot in the shared counter array. */
  readonly slot: number;
  readonly counts: SharedArrayBuffer;
}

/** Runs one node on a worker thread until told to stop; publishes its records-in count in shared memory. */
async function workerMain(input: WorkerInput): Promise<void> {
  const counts = new Float64Array(input.counts);
  const logger = pino({ level: 'warn' });
  const repository = await openRepository(input.config);
  const handle = await startDedupNode(input.config, repository, logger);
  const timer = setInterval(() => {
    counts[input.slot] = handle.totals().recordsIn;
  }, 10);
  parentPort?.once('message', async () => {
    clearInterval(timer);
    counts[input.slot] = handle.totals().recordsIn;
    await handle.stop();
    parentPort?.postMessage('stopped');
  });
}

/** The restart as `n` nodes in one group on `n` worker threads, each with its own store. */
async function runWorkers(base: NodeConfig, n: number, total: number): Promise<Omit<Restart, 'name'>> {
  const counts = new SharedArrayBuffer(8 * n);
  const view = new Float64Array(counts);
  const dirs: string[] = [];
  const restartAt = performance.now();
  const workers: Worker[] = [];
  for (let slot = 0; slot < n; slot++) {
    const dir = await mkdtemp(join(tmpdir(), 'idem-bench-cu-worker-'));
    dirs.push(dir);
    // A shared store (Redis) is shared; RocksDB is local to each node, as with two instances.
    const repository =
      base.repository.type === 'rocksdb' ? { ...base.repository, path: dir } : base.repository;
    const config = { ...base, repository } as NodeConfig;
    // tsx's loader is per thread: the worker registers it before it imports this file.
    const boot = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(import.meta.url)}); })`;
    workers.push(new Worker(boot, { eval: true, workerData: { config, slot, counts } }));
  }
  const m = await measure(() => view.reduce((a, b) => a + b, 0), total);
  await Promise.all(
    workers.map(
      (w) =>
        new Promise<void>((resolve) => {
          w.once('message', () => resolve());
          w.postMessage('stop');
        }),
    ),
  );
  await Promise.all(workers.map((w) => w.terminate()));
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  return {
    recordsPerSecond: m.perSecond,
    seconds: m.seconds,
    secondsToZero: (m.lastAt - restartAt) / 1000,
    out: 0,
    cpuMicrosPerRecord: m.cpuMicrosPerRecord,
    cpuUse: (m.cpuMicrosPerRecord * m.perSecond) / 1e6,
    catchUpLines: [],
  };
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

function report(copies: readonly Result[], restarts: readonly Restart[], bound: Result | undefined): void {
  const base = copies.length > 0 ? copies.reduce((a, r) => a + r.recordsPerSecond, 0) / copies.length : 0;
  const ordinary = restarts.find((r) => r.name === 'ordinary');
  const header = [
    'run',
    'to zero lag',
    'records/s',
    'vs ordinary',
    'vs copy',
    'cpu µs/rec',
    'cpu use',
    ...PHASES.map((p) => `${p} %`),
  ];
  const rows = [...copies, ...(bound ? [bound] : []), ...restarts].map((r) => {
    const restart = 'secondsToZero' in r ? (r as Restart) : undefined;
    return [
      r.name,
      restart ? `${restart.secondsToZero.toFixed(1)} s` : '',
      Math.round(r.recordsPerSecond).toLocaleString('en-US'),
      ordinary && restart ? `${Math.round((r.recordsPerSecond / ordinary.recordsPerSecond) * 100)}%` : '',
      base > 0 ? `${Math.round((r.recordsPerSecond / base) * 100)}%` : '',
      r.cpuMicrosPerRecord.toFixed(1),
      restart ? restart.cpuUse.toFixed(2) : '',
      ...PHASES.map((p) =>
        r.phases && r.seconds > 0 ? String(Math.round((r.phases[p] / r.seconds) * 100)) : '',
      ),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => (row[i] ?? '').length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  log('');
  log(line(header));
  log(line(widths.map((w) => '-'.repeat(w))));
  for (const row of rows) log(line(row));
  const load = loadavg().map((l) => l.toFixed(2));
  log('');
  log(`load average (1, 5, 15 min): ${load.join(', ')} on ${PARTITIONS} partitions, this box's cores shared`);
  log('to zero lag: from the restart call (group join included) to the last backlog record handled.');
  log(
    'records/s: first record to last. cpu use: CPU seconds of this process per wall second (1.0 = one core).',
  );

  const sink = new FigureSink(
    'kafka-catch-up',
    `npm run bench:catch-up -- --records ${RECORDS} --repository ${values.repository}`,
  );
  for (const r of copies) sink.figure(r.name, r.recordsPerSecond, 'records/s');
  if (bound) sink.figure(bound.name, bound.recordsPerSecond, 'records/s');
  for (const r of restarts) {
    sink.figure(`${r.name}: time to zero lag`, r.secondsToZero, 's');
    sink.figure(`${r.name}: records/s`, r.recordsPerSecond, 'records/s');
  }
  const catchUp = restarts.find((r) => r.name === 'catch-up');
  if (catchUp && ordinary) {
    // Issue 34's row: how many times shorter the way back to zero lag is with catch-up on.
    sink.ratio({
      id: 'kafka-catch-up.time-to-zero-lag',
      label: 'time to zero lag, catch-up off / on',
      value: ordinary.secondsToZero / catchUp.secondsToZero,
      target: 1.5,
      kind: 'min',
      baseline: 'the same node restarted with catchUp.enabled = false, same run',
    });
    sink.ratio({
      id: 'kafka-catch-up.catch-up-vs-ordinary',
      label: 'catch-up rate vs the ordinary node',
      value: catchUp.recordsPerSecond / ordinary.recordsPerSecond,
      kind: 'min',
      baseline: 'the same node restarted with catchUp.enabled = false, same run',
    });
  }
  if (bound && ordinary) {
    // The row's ceiling: a restart whose backlog went at the dedup-free copy's rate, after the same group join.
    const join = ordinary.secondsToZero - ordinary.seconds;
    const boundToZero = join + RECORDS / bound.recordsPerSecond;
    log(
      `bound: the copy's rate after the ordinary restart's ${join.toFixed(1)} s join reaches zero lag in ` +
        `${boundToZero.toFixed(1)} s, ${(ordinary.secondsToZero / boundToZero).toFixed(2)}× shorter than the ordinary node`,
    );
    sink.ratio({
      id: 'kafka-catch-up.bound',
      label:
        'time to zero lag, catch-up off / the dedup-free copy on the same client (the ceiling of the row)',
      value: ordinary.secondsToZero / boundToZero,
      kind: 'min',
      baseline: 'the same node restarted with catchUp.enabled = false, same run',
    });
  }
  for (const r of restarts) {
    if (base === 0) continue;
    sink.ratio({
      id: `kafka-catch-up.${r.name}-vs-copy`,
      label: `restart far behind, ${r.name} (${values.repository})`,
      value: r.recordsPerSecond / base,
      kind: 'min',
      baseline: 'plain kafkajs consume→produce copy, mean of two runs',
    });
  }
  sink.note(`backlog ${RECORDS} records over ${PARTITIONS} partitions, ${DUPLICATE_SHARE * 100}% duplicates`);
  sink.note(
    `chunks: ${BATCH_SIZE} ordinary, ${CATCH_UP_BATCH_SIZE} catching up; lag threshold ${LAG_THRESHOLD}`,
  );
  sink.write(values.json);
}

async function main(): Promise<void> {
  await admin.connect();
  const input = await createTopic(`idem-bench-cu-in-${suffix}`);
  log(
    `broker ${BROKERS.join(',')}, backlog ${RECORDS} records (${DUPLICATE_SHARE * 100}% duplicates) after a ` +
      `${WARMUP}-record warm-up, ${values.repository}, chunks ${BATCH_SIZE} / ${CATCH_UP_BATCH_SIZE} catching up, ` +
      `lag threshold ${LAG_THRESHOLD}`,
  );
  if (values['cpu-prof']) await mkdir(values['cpu-prof'], { recursive: true });
  const variants: Variant[] = [];
  const copies: Result[] = [];
  const restarts: Restart[] = [];
  let bound: Result | undefined;
  try {
    await prefill(input, WARMUP, DUPLICATE_SHARE, 0);
    for (const name of ['ordinary', 'catch-up', 'workers'] as const) {
      if (!runs.has(name)) continue;
      const v = await variant(name, input);
      variants.push(v);
      await runNode(v.config, WARMUP, `${name} warm-up`);
    }
    log('nodes stopped; producing the backlog');
    await prefill(input, RECORDS, DUPLICATE_SHARE, WARMUP * 10);
    // The copy takes the node's fetch and chunk settings from a node config.
    const copyConfig = nodeConfigSchema.parse({
      kafka: { brokers: BROKERS },
      input: { topic: input, batchSize: BATCH_SIZE },
      output: { topic: input },
      dlq: { topic: input },
      dedup: { id: 'uid' },
      repository: { type: 'memory' },
    });
    const copyOnce = async (name: string) => {
      const output = await createTopic(`idem-bench-cu-copy${copies.length}-${suffix}`);
      const r = await copy(copyConfig, input, output, name, WARMUP + RECORDS);
      log(`${name}: ${Math.round(r.recordsPerSecond)}/s`);
      copies.push(r);
    };
    if (runs.has('copy')) await copyOnce('plain kafkajs copy');
    if (runs.has('bound')) {
      // In requests of the ordinary chunk and of the catch-up chunk: the faster is the ceiling.
      for (const size of [BATCH_SIZE, CATCH_UP_BATCH_SIZE]) {
        const output = await createTopic(`idem-bench-cu-bound${size}-${suffix}`);
        const name = `bound: plain port copy on ${copyConfig.kafka.client}, requests of ${size}`;
        const config = { ...copyConfig, input: { ...copyConfig.input, batchSize: size } };
        const r = await portCopy(
          config,
          input,
          output,
          name,
          WARMUP + RECORDS,
          undefined,
          undefined,
          copyConfig.kafka.client,
        );
        log(`${name}: ${Math.round(r.recordsPerSecond)}/s`);
        if (bound === undefined || r.recordsPerSecond > bound.recordsPerSecond) bound = r;
      }
    }
    for (const v of variants) {
      const profile = values['cpu-prof'] ? join(values['cpu-prof'], `${v.name}.cpuprofile`) : undefined;
      const r =
        v.name === 'workers'
          ? await runWorkers(v.config, 2, RECORDS)
          : await runNode(v.config, RECORDS, v.name, profile);
      restarts.push({ name: v.name, ...r });
      log(`${v.name}: ${r.secondsToZero.toFixed(1)} s to zero lag, ${Math.round(r.recordsPerSecond)}/s`);
      for (const l of r.catchUpLines) log(`  ${l}`);
    }
    if (runs.has('copy') && variants.length > 0) await copyOnce('plain kafkajs copy (again)');
  } finally {
    for (const v of variants) await v.cleanup();
    await admin.deleteTopics({ topics: [...topics, `idem-bench-cu-dlq-${suffix}`] }).catch(() => undefined);
    await admin.disconnect();
  }
  report(copies, restarts, bound);
}

if (isMainThread) await main();
else await workerMain(workerData as WorkerInput);
