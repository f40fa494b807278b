/**
 * Check-and-mark throughput of the rocksdb store against a store that already holds 10M ids, measured in a
 * FRESH process (so lookups reach table files, not a memtable still warm from populating), with a
 * MemoryRepository baseline measured in the same run. Batches of 1000 ids, 90% new and 10% duplicates.
 *
 * The 10M ids are written once, as if they had arrived over 20 hours with a 24 h TTL (an injected clock), so
 * they sit in ~21 hourly buckets as in steady state; the populated store is cached under bench/.data/ and
 * re-runs skip that step. Also prints the bloom filter evidence: negative lookups that must reach RocksDB
 * (key index off) on two cached 1M-id stores, bloom filter on and off.
 *
 * Prints figures and ratios; asserts nothing.
 *
 *   node --import tsx bench/repositories/rocksdb.ts [--ids 10000000] [--batches 300]
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RocksdbRepository, type RocksdbRepositoryOptions } from '../../src/repositories/rocksdb/index.js';
import type { AddEntry } from '../../src/store/types.js';
import { FigureSink } from '../report/figures.js';
import {
  BASE,
  BATCH,
  checkAndMark,
  clockFrom,
  DUPLICATES,
  duSize,
  id,
  SPAN_MS,
  TTL_MS,
  workload,
} from './rocksdb-workload.js';

const { values: args } = parseArgs({
  options: {
    ids: { type: 'string', default: '10000000' },
    batches: { type: 'string', default: '300' },
    phase: { type: 'string' },
    options: { type: 'string', default: '{}' },
    /** Skip the bloom filter evidence (two extra 1M-id stores), for a quick ratio. */
    'no-bloom': { type: 'boolean', default: false },
    /**
     * Only the default store against memory, and startup after a graceful close and after a SIGKILL: no WAL-off
     * or index-off rows, no full rescan, no bloom evidence (the 10M-id run for the note).
     */
    quick: { type: 'boolean', default: false },
    /** Write the figures and ratios as JSON (for `npm run bench:report`). */
    json: { type: 'string' },
  },
});
const IDS = Number(args.ids);
const BATCHES = Number(args.batches);
const BLOOM_IDS = 1_000_000;
const LAYOUT = 6; // bump when the populated layout changes, to invalidate caches (6: blobs)
const self = fileURLToPath(import.meta.url);
const dataDir = fileURLToPath(new URL('../.data/', import.meta.url));
const storeDir = join(dataDir, `rocksdb-${IDS}`);
/** A copy of the populated store that one run measures on and then deletes, so every run starts alike. */
const workDir = join(storeDir, 'work');
const bloomDir = (bits: number) => join(dataDir, `rocksdb-bloom-${bits}-${BLOOM_IDS}`);

/** Replaces the work copy with a copy of the populated store. */
function freshWorkCopy(): void {
  rmSync(workDir, { recursive: true, force: true });
  cpSync(join(storeDir, 'store'), workDir, { recursive: true });
}

// ---- child phases ---------------------------------------------------------------------------------------

/** Writes ids 0..n-1 through the store's own addMany (WAL off: buffered, 64k-record flushes). */
async function populate(
  path: string,
  n: number,
  span: number,
  options: Partial<RocksdbRepositoryOptions>,
): Promise<object> {
  rmSync(path, { recursive: true, force: true });
  let now = BASE;
  const repo = await RocksdbRepository.open({ path, wal: false, ...options, clock: () => now });
  const chunk = 10_000;
  const start = performance.now();
  for (let i = 0; i < n; i += chunk) {
    const entries: AddEntry[] = [];
    for (let k = i; k < Math.min(n, i + chunk); k++) entries.push({ id: id(k) });
    await repo.addMany(entries, { ttlMs: TTL_MS, now });
    now = BASE + Math.floor((span * (i + chunk)) / n);
  }
  const buckets = repo.stats().buckets.length;
  await repo.close();
  const seconds = (performance.now() - start) / 1000;
  // RocksDB replays the WAL into table files on the first open after writing; do it here, not in a measurement.
  await (await RocksdbRepository.open({ path, ...options, clock: () => now })).close();
  writeFileSync(join(path, 'POPULATED'), JSON.stringify({ LAYOUT, n }));
  return { seconds, usPerId: (seconds * 1e6) / n, buckets };
}

/** Fresh process: open the populated store and time both check-and-mark modes. */
async function measure(options: Partial<RocksdbRepositoryOptions>): Promise<object> {
  const run = `${process.pid.toString(36)}${Date.now().toString(36)}`;
  const clock = clockFrom(BASE + SPAN_MS);
  const opening = performance.now();
  const repo = await RocksdbRepository.open({ path: workDir, ...options, clock });
  const openMs = performance.now() - opening;
  // Without the key index every lookup reads all ~21 buckets: fewer batches keep that run short.
  const batches = options.indexMaxMb === 0 ? Math.ceil(BATCHES / 5) : BATCHES;
  await checkAndMark(repo, workload(`${run}-warm-`, 20, IDS), 'lazy');
  const lazy = await checkAndMark(repo, workload(`${run}-lazy-`, batches, IDS), 'lazy');
  const consumer = await checkAndMark(repo, workload(`${run}-consumer-`, batches, IDS), 'consumer');
  const eager = await checkAndMark(repo, workload(`${run}-eager-`, batches, IDS), 'eager');
  const stats = repo.stats();
  await repo.close();
  return {
    openMs,
    lazy: lazy.wall,
    lazyCpu: lazy.cpu,
    consumer: consumer.wall,
    consumerCpu: consumer.cpu,
    eager: eager.wall,
    eagerCpu: eager.cpu,
    buckets: stats.buckets.length,
    indexBytes: stats.index.bytes,
  };
}

/**
 * Startup times on the work copy: after a graceful close (index snapshot), after a SIGKILL that followed one
 * batch of writes (only the blobs written since the snapshot are scanned, the rest come from it), and with no
 * snapshot at all (every bucket rescanned: the worst case after a crash).
 */
async function startup(options: Partial<RocksdbRepositoryOptions>): Promise<object> {
  const clock = clockFrom(BASE + SPAN_MS);
  const time = async () => {
    const start = performance.now();
    const repo = await RocksdbRepository.open({ path: workDir, ...options, clock });
    const ms = performance.now() - start;
    return { repo, ms };
  };
  // The measurements before left WAL to replay into table files: do that first, untimed.
  await (await time()).repo.close();
  const graceful = await time();
  await graceful.repo.close();
  // A child writes a batch and is killed before it can close.
  spawnSync(process.execPath, ['--import', 'tsx', self, '--phase', 'killed', '--ids', String(IDS)], {
    stdio: 'ignore',
  });
  const killed = await time();
  await killed.repo.close();
  if (args.quick) return { graceful: graceful.ms, killed: killed.ms, rescan: Number.NaN };
  rmSync(join(workDir, 'index.bin'), { force: true });
  const rescan = await time();
  await rescan.repo.close();
  return { graceful: graceful.ms, killed: killed.ms, rescan: rescan.ms };
}

/** Child of `startup`: opens the work copy, marks one batch, and SIGKILLs itself. */
async function killed(): Promise<object> {
  const repo = await RocksdbRepository.open({ path: workDir, clock: clockFrom(BASE + SPAN_MS) });
  await repo.addMany(workload(`killed-${process.pid}-`, 1, IDS)[0] as AddEntry[], { ttlMs: TTL_MS });
  process.kill(process.pid, 'SIGKILL');
  return {};
}

/** Memory baseline: the same workload against a MemoryRepository prefilled with 1M ids. */
async function memoryBaseline(): Promise<object> {
  const stored = 1_000_000;
  const repo = new MemoryRepository({ maxEntries: 4_000_000, clock: clockFrom(BASE) });
  for (let i = 0; i < stored; i += 10_000) {
    await repo.addMany(
      Array.from({ length: 10_000 }, (_, k) => ({ id: id(i + k) })),
      { ttlMs: TTL_MS },
    );
  }
  await checkAndMark(repo, workload('warm-', 20, stored), 'lazy');
  // The floor under the memory store: a bare Map's has + set over the same ids (issue 9's second baseline).
  const map = new Map<string, number>();
  for (let i = 0; i < stored; i++) map.set(id(i), 1);
  const mapBatches = workload('map-', BATCHES, stored);
  const mapStart = performance.now();
  for (const batch of mapBatches)
    for (const { id: key } of batch) if (!map.has(key as string)) map.set(key as string, 1);
  const bareMap = ((performance.now() - mapStart) * 1000) / (BATCHES * BATCH);
  map.clear();
  const lazy = await checkAndMark(repo, workload('lazy-', BATCHES, stored), 'lazy');
  const consumer = await checkAndMark(repo, workload('consumer-', BATCHES, stored), 'consumer');
  const eager = await checkAndMark(repo, workload('eager-', BATCHES, stored), 'eager');
  return {
    bareMap,
    lazy: lazy.wall,
    lazyCpu: lazy.cpu,
    consumer: consumer.wall,
    consumerCpu: consumer.cpu,
    eager: eager.wall,
    eagerCpu: eager.cpu,
  };
}

/**
 * Fresh process: negative lookups that must reach RocksDB (key index off), on a store written with `bits`
 * bloom bits per key. Evidence that the filter is consulted: with it, only its ~1% false positives load a data
 * block into the block cache; without it, every lookup does. (Bytes read from files cannot show it: this binding's
 * MultiGet reads through io_uring, which /proc/self/io does not count.)
 */
async function bloom(bits: number): Promise<object> {
  const repo = await RocksdbRepository.open({
    path: bloomDir(bits),
    bloomBitsPerKey: bits,
    indexMaxMb: 0,
    // Large enough for every data block, so its growth counts the blocks read rather than saturating.
    blockCacheMb: 256,
    clock: clockFrom(BASE + SPAN_MS),
  });
  const property = (name: string) => Object.values(repo.bucketProperty(name));
  const cacheBytes = () => property('rocksdb.block-cache-usage').reduce((sum, v) => sum + Number(v), 0);
  const tables = property('rocksdb.aggregated-table-properties');
  const sum = (pattern: RegExp) => tables.reduce((total, t) => total + Number(pattern.exec(t)?.[1] ?? 0), 0);
  const lookups = 100_000;
  const keys = Array.from({ length: lookups }, (_, i) => id(i, 'absent-'));
  const cacheBefore = cacheBytes();
  const start = performance.now();
  let found = 0;
  for (let i = 0; i < lookups; i += BATCH) {
    for (const hit of await repo.containsMany(keys.slice(i, i + BATCH))) if (hit) found++;
  }
  const us = ((performance.now() - start) * 1000) / lookups;
  const result = {
    bits,
    filterBytes: sum(/filter block size=(\d+)/),
    dataBytes: sum(/data block size=(\d+)/),
    us,
    cacheGrowth: cacheBytes() - cacheBefore,
    found,
  };
  await repo.close();
  return result;
}

// ---- orchestration --------------------------------------------------------------------------------------

function child(phase: string, options: object = {}): Record<string, number | string> {
  const out = execFileSync(
    process.execPath,
    [
      '--max-old-space-size=4096',
      '--import',
      'tsx',
      self,
      '--phase',
      phase,
      '--ids',
      String(IDS),
      '--batches',
      String(BATCHES),
      '--options',
      JSON.stringify(options),
      ...(args.quick ? ['--quick'] : []),
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  return JSON.parse(out.trim().split('\n').pop() as string);
}

function populated(path: string, n: number): boolean {
  try {
    const marker = JSON.parse(readFileSync(join(path, 'POPULATED'), 'utf8'));
    return marker.LAYOUT === LAYOUT && marker.n === n;
  } catch {
    return false;
  }
}

async function main(): Promise<void> {
  const options = JSON.parse(args.options as string) as Partial<RocksdbRepositoryOptions>;
  if (args.phase !== undefined) {
    const phases: Record<string, () => Promise<object>> = {
      populate: () => populate(join(storeDir, 'store'), IDS, SPAN_MS, {}),
      'populate-bloom': () =>
        // One bucket: the ids form one table file far larger than the 8 MiB block cache.
        populate(bloomDir(options.bloomBitsPerKey ?? 10), BLOOM_IDS, 0, {
          bloomBitsPerKey: options.bloomBitsPerKey,
        }),
      measure: () => measure(options),
      memory: memoryBaseline,
      bloom: () => bloom(options.bloomBitsPerKey ?? 10),
      startup: () => startup(options),
      killed,
    };
    console.log(JSON.stringify(await (phases[args.phase] as () => Promise<object>)()));
    return;
  }

  const started = performance.now();
  // Calibration: this store's costs are mostly memory latency (Maps, RocksDB's skiplist), which varies a lot
  // between machines; a plain Map.set of 1M string keys tells readers how this one compares to theirs.
  const calibration = Array.from({ length: 1_000_000 }, (_, i) => id(i, 'cal-'));
  const map = new Map<string, number>();
  const mapStart = performance.now();
  for (const key of calibration) map.set(key, 1);
  const mapNs = ((performance.now() - mapStart) * 1e6) / calibration.length;
  console.log(
    `load average at start: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} (2 cores; figures scale with it)`,
  );
  if (!populated(join(storeDir, 'store'), IDS)) {
    console.log(`populating ${IDS} ids (once; cached in ${storeDir}) ...`);
    const p = child('populate');
    console.log(
      `  ${Number(p.seconds).toFixed(0)} s, ${Number(p.usPerId).toFixed(2)} µs/id, ${p.buckets} buckets`,
    );
  }
  const noBloom = args['no-bloom'] || args.quick;
  for (const bits of noBloom ? [] : [10, 0]) {
    if (!populated(bloomDir(bits), BLOOM_IDS)) {
      console.log(`populating the ${bits === 0 ? 'no-bloom' : 'bloom'} store (${BLOOM_IDS} ids, once) ...`);
      child('populate-bloom', { bloomBitsPerKey: bits });
    }
  }
  console.log(`store on disk: ${((await duSize(join(storeDir, 'store'))) / 2 ** 20).toFixed(0)} MiB`);
  console.log(`calibration: Map.set of 1M string keys, ${mapNs.toFixed(0)} ns per key`);

  console.log('measuring in fresh processes ...');
  freshWorkCopy();
  const memory = child('memory');
  const walOn = child('measure', { wal: true });
  const walOff = args.quick ? undefined : child('measure', { wal: false });
  const noIndex = args.quick ? undefined : child('measure', { wal: true, indexMaxMb: 0 });
  // Startup on a fresh copy of the populated store: the key-index-off run above wrote its records under their
  // own keys, into the bucket the killed child then writes to, and a store that went through that is rescanned
  // whole after a crash (seconds here), which is not what a user of the default store sees.
  freshWorkCopy();
  const opens = child('startup');
  const blooms = noBloom
    ? []
    : [child('bloom', { bloomBitsPerKey: 10 }), child('bloom', { bloomBitsPerKey: 0 })];

  const m = (v: number | string | undefined) => Number(v);
  const rows: [string, Record<string, number | string>][] = [
    ['memory (1M ids held)', memory],
    ['rocksdb, WAL on (default)', walOn],
    ...(walOff === undefined
      ? []
      : [['rocksdb, WAL off', walOff] as [string, Record<string, number | string>]]),
    ...(noIndex === undefined
      ? []
      : [['rocksdb, WAL on, key index off', noIndex] as [string, Record<string, number | string>]]),
  ];
  console.log(
    `\ncheck-and-mark, ${IDS.toLocaleString('en')} ids stored in ${walOn.buckets} buckets; ` +
      `${BATCHES} batches of ${BATCH}, ${DUPLICATES * 100}% duplicates`,
  );
  console.log('µs per id, wall time / CPU time of the process (ratio to memory)');
  console.log(
    'store                                  lazy mark (addMany)            lazy, consumer (getMany + markMany)  eager claim + confirmMany',
  );
  const cell = (r: Record<string, number | string>, key: string) =>
    `${m(r[key]).toFixed(2)}/${m(r[`${key}Cpu`]).toFixed(2)} ` +
    `(${(m(r[key]) / m(memory[key])).toFixed(1)}x/${(m(r[`${key}Cpu`]) / m(memory[`${key}Cpu`])).toFixed(1)}x)`;
  for (const [name, r] of rows) {
    console.log(
      `${name.padEnd(38)} ${cell(r, 'lazy').padEnd(30)} ${cell(r, 'consumer').padEnd(36)} ${cell(r, 'eager')}`,
    );
  }
  console.log(
    `bare Map has + set of the same ids: ${m(memory.bareMap).toFixed(2)} µs/id; memory store lazy mark ` +
      `${(m(memory.lazy) / m(memory.bareMap)).toFixed(1)}x, eager ${(m(memory.eager) / m(memory.bareMap)).toFixed(1)}x it`,
  );
  console.log(`key index: ${(m(walOn.indexBytes) / 2 ** 20).toFixed(0)} MiB`);
  console.log(
    `startup: ${m(opens.graceful).toFixed(0)} ms after a graceful close (index snapshot), ` +
      `${m(opens.killed).toFixed(0)} ms after a SIGKILL (blobs written since the snapshot scanned), ` +
      (args.quick
        ? 'no-snapshot rescan not run (--quick)'
        : `${m(opens.rescan).toFixed(0)} ms with no snapshot (every bucket rescanned)`),
  );

  console.log(
    `\nbloom filter evidence: ${BLOOM_IDS.toLocaleString('en')} ids, key index off, fresh process,`,
  );
  console.log('100,000 lookups of absent ids, each must ask RocksDB');
  console.log('bits/key  filter in SST files  µs/lookup  data blocks loaded into block cache');
  for (const b of blooms) {
    const filter = `${(m(b.filterBytes) / 2 ** 20).toFixed(2)} MiB`;
    const loaded = `${(m(b.cacheGrowth) / 2 ** 20).toFixed(2)} MiB (of ${(m(b.dataBytes) / 2 ** 20).toFixed(0)} MiB data)`;
    console.log(
      `${String(b.bits).padStart(8)}  ${filter.padStart(19)}  ${m(b.us).toFixed(2).padStart(9)}  ${loaded}`,
    );
  }
  rmSync(workDir, { recursive: true, force: true });
  const sink = new FigureSink(
    'rocksdb',
    `node --import tsx bench/repositories/rocksdb.ts --ids ${IDS} --batches ${BATCHES}`,
  );
  for (const [name, r] of rows) {
    sink.figure(`${name}, lazy mark`, m(r.lazy), 'µs/id');
    sink.figure(`${name}, lazy as the consumer (getMany + markMany)`, m(r.consumer), 'µs/id');
    sink.figure(`${name}, eager claim + confirm`, m(r.eager), 'µs/id');
  }
  sink.figure('bare Map has + set, same ids', m(memory.bareMap), 'µs/id');
  sink.figure('startup after a graceful close', m(opens.graceful), 'ms');
  sink.figure('startup after a SIGKILL', m(opens.killed), 'ms');
  for (const key of ['lazy', 'eager'] as const) {
    sink.ratio({
      id: `rocksdb.${key}-vs-memory`,
      label: `RocksDB check-and-mark (${key === 'lazy' ? 'lazy mark' : 'eager claim + confirm'}), ${IDS.toLocaleString('en')} ids stored`,
      value: m(walOn[key]) / m(memory[key]),
      // Issue 22: eager ≤ 1.2× the memory store, lazy stays ≤ 1.0×.
      target: key === 'lazy' ? 1 : 1.2,
      kind: 'max',
      baseline: 'memory store, same ids and batches',
    });
  }
  sink.write(args.json);
  const load = loadavg().map((l) => l.toFixed(1));
  console.log(
    `\ntotal ${((performance.now() - started) / 1000).toFixed(0)} s; load average now ${load.join(' ')}`,
  );
}

await main();
