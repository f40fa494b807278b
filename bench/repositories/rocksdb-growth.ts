/**
 * How the embedded RocksDB store's cost grows with the ids it holds (issue 22, "How cost grows"). At each size
 * (default 1M, 10M, 50M ids stored) it
 *
 * 1. fills a fresh store in a child process through the store's own lazy mark (`markMany`, batches of 10,000,
 *    WAL on: the blobs, hourly buckets and key index a consumer's marks make), the ids arriving over 20 h of
 *    injected time with a 24 h TTL (~21 buckets), and SIGKILLs that child once the last write returns: it never
 *    closes, so no key index snapshot is written;
 * 2. times startup (open until it resolves, ready to claim), each open in a fresh process: after that SIGKILL
 *    (RocksDB replays its WAL, every bucket is rescanned), after a graceful close (the snapshot is read), and
 *    after a SIGKILL of a process that opened the store gracefully and marked one batch (only blobs written
 *    since the snapshot are scanned);
 * 3. measures check-and-mark in a fresh process, as bench/repositories/rocksdb.ts does (batches of 1000, 10%
 *    stored ids): lazy mark (addMany) and eager claim + confirmMany, µs per id; and memory: RSS after open and
 *    after the workload, on-disk size, the key index's own bytes, RocksDB's index and filter blocks and its
 *    raw key + value bytes, all per id stored.
 *
 * The store directory is under the OS temporary directory and deleted after each size. The key index is sized
 * for the ids as docs/rocksdb.md tells a user to (`expectedIds`, and `indexMaxMb` above its 256 MiB default
 * where the ids need it: the default holds ~25M ids), so every size runs with the index holding all its ids.
 *
 * Prints figures and ratios; asserts nothing.
 *
 *   node --import tsx bench/repositories/rocksdb-growth.ts [--sizes 1e6,1e7,5e7] [--batches 300] [--profile DIR]
 *     [--options '{"blockCacheMb":64}']
 *   (or IDEM_GROWTH_SIZES=1e6,1e7 npm run bench:growth)
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RocksdbRepository, type RocksdbRepositoryOptions } from '../../src/repositories/rocksdb/index.js';
import { encodeRecord, newRecord } from '../../src/store/record.js';
import type { AddEntry } from '../../src/store/types.js';
import { FigureSink } from '../report/figures.js';
import {
  BASE,
  BATCH,
  checkAndMark,
  clockFrom,
  duSize,
  id,
  SPAN_MS,
  TTL_MS,
  workload,
} from './rocksdb-workload.js';

const { values: args } = parseArgs({
  options: {
    sizes: { type: 'string', default: process.env.IDEM_GROWTH_SIZES ?? '1e6,1e7,5e7' },
    batches: { type: 'string', default: '300' },
    /** Parent of the store directories (a fresh one per run, deleted after). */
    dir: { type: 'string', default: tmpdir() },
    phase: { type: 'string' },
    ids: { type: 'string' },
    path: { type: 'string' },
    out: { type: 'string' },
    /** Store options (JSON) over the defaults at every size, e.g. `{"blockCacheMb":64}`, to test a setting. */
    options: { type: 'string', default: '{}' },
    /** Write a CPU profile of each size's check-and-mark process (and its startup opens) into this directory. */
    profile: { type: 'string' },
    json: { type: 'string' },
  },
});
const BATCHES = Number(args.batches);
/** Ids per markMany call when filling: larger than a consumer's batches, the same records and blobs. */
const FILL_CHUNK = 10_000;
const self = fileURLToPath(import.meta.url);
const MIB = 2 ** 20;
const extraOptions = JSON.parse(args.options as string) as Partial<RocksdbRepositoryOptions>;

/** `--sizes`: comma-separated counts, `1e6` and `1_000_000` forms allowed; a bad one names the flag. */
function parseSizes(text: string): number[] {
  const sizes = text.split(',').map((s) => Number(s.trim().replaceAll('_', '')));
  for (const [i, n] of sizes.entries()) {
    if (!Number.isInteger(n) || n < 10 * BATCH) {
      throw new Error(
        `--sizes (or IDEM_GROWTH_SIZES): item ${i + 1} of "${text}" must be an integer ≥ ${10 * BATCH}`,
      );
    }
  }
  return sizes.sort((a, b) => a - b);
}

/**
 * Store options for `ids` stored ids: `expectedIds` covers them and the ids the measurement adds, and
 * `indexMaxMb` is raised to the presized tables where the 256 MiB default would be too small (mirrors the
 * sizing in src/repositories/rocksdb/key-index.ts: 16 tables, ≤ 3/4 full, powers of two, 8 bytes an entry).
 */
function storeOptions(ids: number): Partial<RocksdbRepositoryOptions> {
  const expectedIds = ids + 3 * BATCHES * BATCH;
  const share = expectedIds / 16;
  const needed = Math.ceil(share + 5 * Math.sqrt(share) + 1);
  let capacity = 256;
  while (capacity * 0.75 < needed) capacity *= 2;
  const indexMaxMb = Math.max(256, (capacity * 16 * 8) / MIB);
  return { expectedIds, indexMaxMb, ...extraOptions };
}

// ---- child phases ---------------------------------------------------------------------------------------

/**
 * Fills a fresh store with ids 0..n-1 through markMany, writes its timing to `out`, and SIGKILLs itself. It never
 * closes: the next open has only the key index snapshots the store saved while it ran (`indexSnapshotKeys`).
 */
async function fill(path: string, n: number, out: string): Promise<never> {
  let now = BASE;
  const repo = await RocksdbRepository.open({ path, ...storeOptions(n), clock: () => now });
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < n; i += FILL_CHUNK) {
    const entries: AddEntry[] = [];
    for (let k = i; k < Math.min(n, i + FILL_CHUNK); k++) entries.push({ id: id(k) });
    await repo.markMany(entries, { ttlMs: TTL_MS });
    now = BASE + Math.floor((SPAN_MS * (i + FILL_CHUNK)) / n);
  }
  const seconds = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  const stats = repo.stats();
  writeFileSync(
    out,
    JSON.stringify({
      seconds,
      cpuSeconds: (used.user + used.system) / 1e6,
      buckets: stats.buckets.length,
      rssMb: process.memoryUsage().rss / MIB,
    }),
  );
  // The filling process dies without closing: only a periodic index snapshot, RocksDB's memtables only in its WAL.
  process.kill(process.pid, 'SIGKILL');
  return new Promise(() => undefined);
}

/** Fresh process: one timed open of the store (until it resolves, ready to claim), then a graceful close. */
async function open(path: string, n: number) {
  const rssBefore = process.memoryUsage().rss;
  const start = performance.now();
  const repo = await RocksdbRepository.open({ path, ...storeOptions(n), clock: clockFrom(BASE + SPAN_MS) });
  const ms = performance.now() - start;
  const rss = process.memoryUsage().rss - rssBefore;
  const { startup } = repo.stats();
  const closing = performance.now();
  await repo.close();
  return { ms, rssMb: rss / MIB, closeMs: performance.now() - closing, startup };
}

/** Opens the store gracefully, marks one batch of new ids, and SIGKILLs itself before closing. */
async function killedRun(path: string, n: number): Promise<never> {
  const repo = await RocksdbRepository.open({ path, ...storeOptions(n), clock: clockFrom(BASE + SPAN_MS) });
  await repo.markMany(workload(`killed-${process.pid}-`, 1, n)[0] as AddEntry[], { ttlMs: TTL_MS });
  process.kill(process.pid, 'SIGKILL');
  return new Promise(() => undefined);
}

/** Sum over the buckets of a numeric RocksDB property. */
function propertySum(repo: RocksdbRepository, name: string): number {
  return Object.values(repo.bucketProperty(name)).reduce((sum, v) => sum + Number(v), 0);
}

/** Sum over the buckets of a field of `rocksdb.aggregated-table-properties` (e.g. `index block size`). */
function tableSum(repo: RocksdbRepository, field: RegExp): number {
  return Object.values(repo.bucketProperty('rocksdb.aggregated-table-properties')).reduce(
    (sum, text) => sum + Number(field.exec(text)?.[1] ?? 0),
    0,
  );
}

/** Fresh process: check-and-mark (lazy, then eager) on the store, and what it holds in memory and on disk. */
async function measure(path: string, n: number) {
  const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
  // The workload's ids are built first, so the RSS measured around the store leaves them out.
  const warm = workload(`${run}-warm-`, 20, n);
  const lazyIds = workload(`${run}-lazy-`, BATCHES, n);
  const eagerIds = workload(`${run}-eager-`, BATCHES, n);
  global.gc?.();
  const rssBase = process.memoryUsage().rss;
  const repo = await RocksdbRepository.open({ path, ...storeOptions(n), clock: clockFrom(BASE + SPAN_MS) });
  const rssOpen = process.memoryUsage().rss;
  await checkAndMark(repo, warm, 'lazy');
  const lazy = await checkAndMark(repo, lazyIds, 'lazy');
  const eager = await checkAndMark(repo, eagerIds, 'eager');
  global.gc?.();
  const rssEnd = process.memoryUsage().rss;
  const stats = repo.stats();
  const result = {
    lazy: lazy.wall,
    lazyCpu: lazy.cpu,
    eager: eager.wall,
    eagerCpu: eager.cpu,
    rssBase,
    rssOpen,
    rssEnd,
    buckets: stats.buckets.length,
    unindexed: stats.buckets.filter((b) => !b.indexed).length,
    indexBytes: stats.index.bytes,
    indexEntries: stats.index.entries,
    liveData: propertySum(repo, 'rocksdb.estimate-live-data-size'),
    sstFiles: propertySum(repo, 'rocksdb.total-sst-files-size'),
    tableReaders: propertySum(repo, 'rocksdb.estimate-table-readers-mem'),
    memtables: propertySum(repo, 'rocksdb.cur-size-all-mem-tables'),
    blockCache: propertySum(repo, 'rocksdb.block-cache-usage'),
    indexBlocks: tableSum(repo, /index block size[^=]*=(\d+)/),
    filterBlocks: tableSum(repo, /filter block size=(\d+)/),
    rawKeys: tableSum(repo, /raw key size=(\d+)/),
    rawValues: tableSum(repo, /raw value size=(\d+)/),
  };
  await repo.close();
  return result;
}

// ---- orchestration --------------------------------------------------------------------------------------

type Row = Record<string, number>;
type Measured = Awaited<ReturnType<typeof measure>>;
type Opened = Awaited<ReturnType<typeof open>>;

function child<T = Row>(phase: string, n: number, path: string, extra: string[] = []): T {
  const profile = args.profile === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', args.profile];
  const out = execFileSync(
    process.execPath,
    [...profile, '--expose-gc', '--import', 'tsx', self, '--phase', phase, '--ids', String(n), '--path', path]
      .concat(['--batches', String(BATCHES), '--options', args.options as string])
      .concat(extra),
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 20 },
  );
  return JSON.parse(out.trim().split('\n').pop() as string) as T;
}

/** Runs a phase that SIGKILLs itself; fails unless it died of that signal. */
function killedChild(phase: string, n: number, path: string, extra: string[] = []): void {
  const ran = spawnSync(
    process.execPath,
    ['--import', 'tsx', self, '--phase', phase, '--ids', String(n), '--path', path]
      .concat(['--batches', String(BATCHES), '--options', args.options as string])
      .concat(extra),
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
  if (ran.signal !== 'SIGKILL') throw new Error(`phase ${phase} ended with ${ran.status ?? ran.signal}`);
}

/** Bytes of one stored id as data: its UTF-8 key and its encoded record (a lazy mark's), nothing else. */
function payloadBytes(n: number): number {
  const record = encodeRecord(newRecord('', {}, { ttlMs: TTL_MS }, BASE));
  let keys = 0;
  const sample = 10_000;
  for (let i = 0; i < sample; i++) keys += Buffer.byteLength(id(Math.floor((i * n) / sample)));
  return keys / sample + Buffer.byteLength(record);
}

interface SizeResult {
  readonly ids: number;
  readonly fill: Row;
  readonly afterFillKill: Opened;
  readonly graceful: Opened;
  readonly afterRunKill: Opened;
  readonly measured: Measured;
  readonly diskBytes: number;
  readonly payload: number;
}

async function runSize(n: number, root: string): Promise<SizeResult> {
  const path = join(root, `store-${n}`);
  const out = join(root, `fill-${n}.json`);
  console.log(`\n--- ${n.toLocaleString('en')} ids: filling through markMany ...`);
  killedChild('fill', n, path, ['--out', out]);
  const fill = JSON.parse(readFileSync(out, 'utf8')) as Row;
  console.log(
    `  filled in ${Number(fill.seconds).toFixed(1)} s (${((Number(fill.seconds) * 1e6) / n).toFixed(2)} µs/id, ` +
      `CPU ${Number(fill.cpuSeconds).toFixed(1)} s), ${fill.buckets} buckets; SIGKILLed before closing`,
  );
  const afterFillKill = child<Opened>('open', n, path);
  console.log(
    `  startup after the filling process's SIGKILL (only its periodic snapshot): ${afterFillKill.ms?.toFixed(0)} ms ` +
      `(buckets: ${JSON.stringify(afterFillKill.startup)})`,
  );
  const graceful = child<Opened>('open', n, path);
  console.log(`  startup after a graceful close: ${graceful.ms?.toFixed(0)} ms`);
  killedChild('killed-run', n, path);
  const afterRunKill = child<Opened>('open', n, path);
  console.log(`  startup after a SIGKILL that followed one batch: ${afterRunKill.ms?.toFixed(0)} ms`);
  const measured = child<Measured>('measure', n, path);
  // After the workload, as the other bytes per id: of the ids held then (the index's entries).
  const diskBytes = await duSize(path);
  console.log(
    `  check-and-mark: lazy ${measured.lazy?.toFixed(2)} µs/id, eager ${measured.eager?.toFixed(2)} µs/id; ` +
      `RSS ${((Number(measured.rssEnd) - Number(measured.rssBase)) / n).toFixed(1)} B/id, ` +
      `disk ${(diskBytes / n).toFixed(1)} B/id, key index ${(Number(measured.indexBytes) / n).toFixed(1)} B/id`,
  );
  console.log(`  measured: ${JSON.stringify(measured)}`);
  rmSync(path, { recursive: true, force: true });
  return {
    ids: n,
    fill,
    afterFillKill,
    graceful,
    afterRunKill,
    measured,
    diskBytes,
    payload: payloadBytes(n),
  };
}

const label = (n: number) => (n >= 1e6 ? `${n / 1e6}M` : n >= 1e3 ? `${n / 1e3}k` : String(n));

async function main(): Promise<void> {
  if (args.phase !== undefined) {
    const n = Number(args.ids);
    const path = args.path as string;
    if (args.phase === 'fill') await fill(path, n, args.out as string);
    if (args.phase === 'killed-run') await killedRun(path, n);
    const phases: Record<string, () => Promise<object>> = {
      open: () => open(path, n),
      measure: () => measure(path, n),
    };
    const phase = phases[args.phase];
    if (phase === undefined) throw new Error(`--phase: unknown phase ${args.phase}`);
    console.log(JSON.stringify(await phase()));
    return;
  }
  const sizes = parseSizes(args.sizes as string);
  const started = performance.now();
  console.log(
    `rocksdb growth: ${sizes.map(label).join(', ')} ids stored; ${BATCHES} batches of ${BATCH}, 10% stored ids; ` +
      `load average at start ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}`,
  );
  const root = mkdtempSync(join(args.dir as string, 'idem-rocksdb-growth-'));
  const results: SizeResult[] = [];
  try {
    for (const n of sizes) results.push(await runSize(n, root));
  } finally {
    rmSync(root, { recursive: true, force: true });
  }

  // Per id held when measured: the stored ids plus those the workload added (the index counts them).
  const perId = (r: SizeResult, bytes: number) => bytes / r.measured.indexEntries;
  const rss = (r: SizeResult) => perId(r, r.measured.rssEnd - r.measured.rssBase);
  const table = results.map((r, i) => {
    const m = r.measured;
    const previous = results[i - 1];
    return {
      // What each further id costs in RSS, without the fixed part (block caches, memtables, the runtime).
      rssMarginal:
        previous === undefined
          ? Number.NaN
          : (m.rssEnd - m.rssBase - (previous.measured.rssEnd - previous.measured.rssBase)) /
            (m.indexEntries - previous.measured.indexEntries),
      liveData: perId(r, m.liveData),
      ids: r.ids,
      fillS: Number(r.fill.seconds),
      lazy: m.lazy,
      eager: m.eager,
      lazyCpu: m.lazyCpu,
      eagerCpu: m.eagerCpu,
      rssOpen: perId(r, m.rssOpen - m.rssBase),
      rss: rss(r),
      disk: perId(r, r.diskBytes),
      index: perId(r, m.indexBytes),
      rocksIndexFilter: perId(r, m.indexBlocks + m.filterBlocks),
      payload: r.payload,
      rawKv: perId(r, m.rawKeys + m.rawValues),
      afterFillKill: Number(r.afterFillKill.ms),
      graceful: Number(r.graceful.ms),
      afterRunKill: Number(r.afterRunKill.ms),
      unindexed: m.unindexed,
    };
  });
  console.log(
    '\nids stored  fill s  lazy µs/id  eager µs/id  RSS B/id (open/end)  disk B/id  key index B/id  ' +
      'RocksDB index+filter B/id  key+record B/id  startup ms: SIGKILL of filler / graceful / SIGKILL after a batch',
  );
  for (const t of table) {
    console.log(
      `${label(t.ids).padStart(10)}  ${t.fillS.toFixed(0).padStart(6)}  ${t.lazy?.toFixed(2).padStart(10)}  ` +
        `${t.eager?.toFixed(2).padStart(11)}  ${`${t.rssOpen.toFixed(1)}/${t.rss.toFixed(1)}`.padStart(19)}  ` +
        `${t.disk.toFixed(1).padStart(9)}  ${t.index.toFixed(1).padStart(14)}  ` +
        `${t.rocksIndexFilter.toFixed(1).padStart(25)}  ${t.payload.toFixed(1).padStart(15)}  ` +
        `${t.afterFillKill.toFixed(0)} / ${t.graceful.toFixed(0)} / ${t.afterRunKill.toFixed(0)}` +
        (t.unindexed ? ` (${t.unindexed} buckets unindexed)` : ''),
    );
  }

  const sink = new FigureSink(
    'rocksdb-growth',
    `node --import tsx bench/repositories/rocksdb-growth.ts --sizes ${sizes.join(',')} --batches ${BATCHES}` +
      (args.options === '{}' ? '' : ` --options '${args.options}'`),
  );
  const first = table[0] as (typeof table)[number];
  const last = table[table.length - 1] as (typeof table)[number];
  for (const t of table) {
    const at = `${label(t.ids)} ids`;
    sink.figure(`${at}: fill through markMany`, t.fillS, 's');
    sink.figure(`${at}: lazy mark`, t.lazy as number, 'µs/id');
    sink.figure(`${at}: eager claim + confirm`, t.eager as number, 'µs/id');
    sink.figure(`${at}: lazy mark, CPU time`, t.lazyCpu, 'µs/id');
    sink.figure(`${at}: eager claim + confirm, CPU time`, t.eagerCpu, 'µs/id');
    sink.figure(`${at}: RSS after the workload`, t.rss, 'B/id');
    if (!Number.isNaN(t.rssMarginal))
      sink.figure(`${at}: RSS of the ids added since the size before`, t.rssMarginal, 'B/id');
    sink.figure(`${at}: on disk`, t.disk, 'B/id');
    sink.figure(`${at}: key index`, t.index, 'B/id');
    sink.figure(`${at}: startup after a graceful close`, t.graceful, 'ms');
    sink.figure(`${at}: startup after the filling process's SIGKILL`, t.afterFillKill, 'ms');
  }
  if (table.length > 1) {
    for (const key of ['lazy', 'eager'] as const) {
      sink.ratio({
        id: `rocksdb-growth.${key}-${label(last.ids)}-vs-${label(first.ids)}`,
        label: `RocksDB ${key === 'lazy' ? 'lazy mark' : 'eager claim + confirm'}, µs/id at ${label(last.ids)} vs ${label(first.ids)} ids stored`,
        value: (last[key] as number) / (first[key] as number),
        target: 1.5,
        kind: 'max',
        baseline: `the same store and workload at ${label(first.ids)} ids`,
      });
    }
  }
  // Startup has an absolute target (5 s at the largest size): as a ratio to it, so the chart shows it too.
  for (const [key, what] of [
    ['graceful', 'after a graceful close'],
    ['afterRunKill', 'after a SIGKILL that followed one batch'],
    ['afterFillKill', "after the filling process's SIGKILL (periodic snapshot only)"],
  ] as const) {
    sink.ratio({
      id: `rocksdb-growth.startup-${key}-${label(last.ids)}`,
      label: `RocksDB startup ${what}, ${label(last.ids)} ids, vs 5 s`,
      value: last[key] / 5000,
      target: 1,
      kind: 'max',
      baseline: '5 s (the target itself)',
    });
  }
  if (table.length > 1) {
    sink.note(
      `Process CPU time per id (all threads), which a loaded machine distorts less than wall time: lazy ` +
        `${(last.lazyCpu / first.lazyCpu).toFixed(2)}×, eager ${(last.eagerCpu / first.eagerCpu).toFixed(2)}× ` +
        `at ${label(last.ids)} against ${label(first.ids)}.`,
    );
  }
  sink.table({
    title: 'How cost grows: the RocksDB store at each size',
    columns: [
      'ids stored',
      'fill (s)',
      'lazy mark µs/id (wall / CPU)',
      'eager µs/id (wall / CPU)',
      'RSS B/id (open / after)',
      'RSS B/id of the ids added since the size before',
      'disk B/id',
      'RocksDB live data B/id',
      'key index B/id',
      'RocksDB index + filter B/id',
      'key + record B/id',
      'startup ms: filler SIGKILLed / graceful / SIGKILL after a batch',
    ],
    rows: table.map((t) => [
      label(t.ids),
      t.fillS.toFixed(0),
      `${t.lazy.toFixed(2)} / ${t.lazyCpu.toFixed(2)}`,
      `${t.eager.toFixed(2)} / ${t.eagerCpu.toFixed(2)}`,
      `${t.rssOpen.toFixed(1)} / ${t.rss.toFixed(1)}`,
      Number.isNaN(t.rssMarginal) ? '—' : t.rssMarginal.toFixed(1),
      t.disk.toFixed(1),
      t.liveData.toFixed(1),
      t.index.toFixed(1),
      t.rocksIndexFilter.toFixed(1),
      t.payload.toFixed(1),
      `${t.afterFillKill.toFixed(0)} / ${t.graceful.toFixed(0)} / ${t.afterRunKill.toFixed(0)}`,
    ]),
  });
  sink.curve({
    id: 'rocksdb-growth.us-per-id',
    title: 'RocksDB check-and-mark as the store grows',
    x: 'ids stored',
    y: 'µs per id',
    series: [
      { name: 'lazy mark', points: table.map((t) => [t.ids, t.lazy as number] as const) },
      { name: 'eager claim + confirm', points: table.map((t) => [t.ids, t.eager as number] as const) },
    ],
  });
  sink.curve({
    id: 'rocksdb-growth.startup',
    title: 'RocksDB startup as the store grows (target: under 5 s)',
    x: 'ids stored',
    y: 'ms',
    series: [
      { name: 'graceful close', points: table.map((t) => [t.ids, t.graceful] as const) },
      { name: 'filler SIGKILLed', points: table.map((t) => [t.ids, t.afterFillKill] as const) },
      { name: 'SIGKILL after a batch', points: table.map((t) => [t.ids, t.afterRunKill] as const) },
    ],
    limit: 5000,
  });
  sink.note(
    'Bytes per id: RSS is the measuring process after the workload minus before it opened the store; the key ' +
      "index's own size is its tables (8 bytes an entry, ≤ 3/4 full, powers of two), the floor of what the store " +
      'keeps resident; "key + record" is the UTF-8 id plus its encoded record, the floor of what it keeps on disk.',
  );
  sink.note(
    `Store options: the defaults, with expectedIds and indexMaxMb sized for the ids (indexMaxMb ${sizes
      .map((n) => `${label(n)}: ${storeOptions(n).indexMaxMb}`)
      .join(', ')} MiB); the 256 MiB default holds ~25M ids.`,
  );
  sink.write(args.json);
  console.log(
    `\ntotal ${((performance.now() - started) / 1000).toFixed(0)} s; load average now ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
}

await main();
