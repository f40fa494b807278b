/**
 * Benchmark of `idem dedup` on the embedded RocksDB store: a cached NDJSON file with 10% duplicates, the real
 * CLI (bin/idem.js) writing to /dev/null, and in the same run a baseline that only reads, JSON.parses and
 * writes every line. Prints lines/s, peak RSS and the ratio; asserts nothing.
 *
 *   npm run bench:cli                      # 10M lines
 *   npm run bench:cli -- --lines 1000000   # quicker
 *   options: --lines N, --dup 0.1, --batch-size N, --no-baseline, --from-source,
 *            --duplicates (also write the audit log of dropped lines, `idem dedup --duplicates FILE`)
 *
 * The CLI measured is the compiled one, as a user of the package runs it: the bench compiles src/ with
 * tsconfig.build.json into bench/.data/dist (when src/ changed). `--from-source` runs bin/idem.js through tsx
 * instead, which adds tsx's loader threads to startup time and memory.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  closeSync,
  copyFileSync,
  createWriteStream,
  existsSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
} from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { prng } from '../test/helpers/random.js';
import { FigureSink } from './report/figures.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DATA = join(ROOT, 'bench', '.data');

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '10000000' },
    dup: { type: 'string', default: '0.1' },
    'batch-size': { type: 'string' },
    'no-baseline': { type: 'boolean', default: false },
    'from-source': { type: 'boolean', default: false },
    duplicates: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});
const lines = Number(values.lines);
const duplicateShare = Number(values.dup);
const sink = new FigureSink('dedup-cli', `npm run bench:cli -- --lines ${lines}`);

/** Writes the input once and caches it under bench/.data; returns its path and distinct id count. */
async function dataset(): Promise<{ path: string; distinct: number }> {
  const name = `events-${lines}-${duplicateShare}`;
  const path = join(DATA, `${name}.ndjson`);
  const meta = join(DATA, `${name}.json`);
  if (existsSync(path) && existsSync(meta))
    return { path, distinct: JSON.parse(readFileSync(meta, 'utf8')).distinct };
  await import('node:fs/promises').then((fs) => fs.mkdir(DATA, { recursive: true }));
  process.stderr.write(`generating ${lines.toLocaleString('en-US')} lines into ${path} ...\n`);
  const random = prng(42);
  const types = ['click', 'view', 'purchase', 'signup', 'logout'];
  const out = createWriteStream(`${path}.tmp`);
  let distinct = 0;
  let chunk = '';
  for (let i = 0; i < lines; i++) {
    // A duplicate repeats a uniformly chosen earlier id, so most are found in the store, not within a batch.
    const id = distinct > 0 && random() < duplicateShare ? Math.floor(random() * distinct) : distinct++;
    chunk += `{"id":"evt-${id.toString(36).padStart(8, '0')}","ts":${1_700_000_000_000 + i * 13},"user":"u-${
      id % 100_000
    }","type":"${types[id % 5]}","value":${(id * 7919) % 10_000}}\n`;
    if (chunk.length > 1 << 20) {
      if (!out.write(chunk)) await once(out, 'drain');
      chunk = '';
    }
  }
  out.end(chunk);
  await once(out, 'finish');
  renameSync(`${path}.tmp`, path);
  await import('node:fs/promises').then((fs) => fs.writeFile(meta, JSON.stringify({ distinct })));
  return { path, distinct };
}

/** The baseline: the same chunked line splitting, JSON.parse per line, one write per chunk; no dedup. */
const BASELINE = `
const fs = require('node:fs');
const out = fs.openSync('/dev/null', 'w');
(async () => {
  let rest;
  for await (const chunk of fs.createReadStream(process.argv[1], { highWaterMark: 1 << 20 })) {
    const data = rest ? Buffer.concat([rest, chunk]) : chunk;
    let start = 0;
    const parts = [];
    for (let end = data.indexOf(10); end !== -1; end = data.indexOf(10, start)) {
      JSON.parse(data.toString('utf8', start, end));
      parts.push(data.subarray(start, end + 1));
      start = end + 1;
    }
    fs.writeSync(out, Buffer.concat(parts));
    rest = start < data.length ? data.subarray(start) : undefined;
  }
})();
`;

interface Measured {
  readonly seconds: number;
  /** User + system CPU seconds of the measured process (from /usr/bin/time when available). */
  readonly cpuSeconds: number | undefined;
  readonly peakRssMb: number;
  /** RSS at each tenth of the run, to show whether memory stays flat. */
  readonly rssMb: number[];
  readonly code: number | null;
  readonly stderr: string;
}

const TIME = '/usr/bin/time';

/**
 * Runs a command with stdout to /dev/null. Under /usr/bin/time when it exists (exact peak RSS and CPU time),
 * and samples the RSS of the measured process from /proc every 100 ms either way.
 */
async function measure(command: string, args: readonly string[]): Promise<Measured> {
  const timed = existsSync(TIME);
  const report = join(tmpdir(), `idem-bench-time-${process.pid}.txt`);
  const devNull = openSync('/dev/null', 'w');
  const started = performance.now();
  const child: ChildProcess = timed
    ? spawn(TIME, ['-o', report, '-f', '%M %U %S', command, ...args], {
        cwd: ROOT,
        stdio: ['ignore', devNull, 'pipe'],
      })
    : spawn(command, args, { cwd: ROOT, stdio: ['ignore', devNull, 'pipe'] });
  closeSync(devNull);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const samples: { at: number; rss: number }[] = [];
  let peak = 0;
  const timer = setInterval(() => {
    try {
      // Under time(1) the measured process is its only child.
      const pid = timed
        ? readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/)[0]
        : String(child.pid);
      if (!pid) return;
      const status = readFileSync(`/proc/${pid}/status`, 'utf8');
      const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
      peak = Math.max(peak, kb('VmHWM'));
      samples.push({ at: performance.now() - started, rss: kb('VmRSS') });
    } catch {
      // The process is gone between two samples.
    }
  }, 100);
  const [code] = (await once(child, 'exit')) as [number | null];
  clearInterval(timer);
  const seconds = (performance.now() - started) / 1000;
  let cpuSeconds: number | undefined;
  if (timed) {
    const fields = readFileSync(report, 'utf8').trim().split('\n').pop()?.split(' ').map(Number) ?? [];
    peak = Math.max(peak, fields[0] ?? 0);
    cpuSeconds = (fields[1] ?? 0) + (fields[2] ?? 0);
    await rm(report, { force: true });
  }
  const rssMb: number[] = [];
  for (let tenth = 1; tenth <= 9; tenth++) {
    const at = (seconds * 1000 * tenth) / 10;
    const sample = samples.find((s) => s.at >= at) ?? samples[samples.length - 1];
    rssMb.push(Math.round((sample?.rss ?? 0) / 1024));
  }
  return { seconds, cpuSeconds, peakRssMb: Math.round(peak / 1024), rssMb, code, stderr };
}

/** ` (12.3 s CPU, 1.2 us/line)` when CPU time is known: on a busy machine it is steadier than wall time. */
function cpu(m: Measured): string {
  return m.cpuSeconds === undefined
    ? ''
    : `, ${m.cpuSeconds.toFixed(1)} s CPU (${((m.cpuSeconds * 1e6) / lines).toFixed(2)} us/line)`;
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/** Compiles src/ into bench/.data/dist unless that copy is newer than every source file; returns main.js. */
function compiledCli(): string {
  const out = join(DATA, 'dist');
  const main = join(out, 'cli', 'main.js');
  // The CLI reads its version from the package.json above its dist/ (`idem --version`): give the copy one.
  copyFileSync(join(ROOT, 'package.json'), join(DATA, 'package.json'));
  const newest = (dir: string): number =>
    readdirSync(dir, { withFileTypes: true }).reduce((latest, entry) => {
      const path = join(dir, entry.name);
      return Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
    }, 0);
  if (existsSync(main) && statSync(main).mtimeMs > newest(join(ROOT, 'src'))) return main;
  process.stderr.write(`compiling src/ into ${out} ...\n`);
  // No declarations: bench/ is type-checked, and stray .d.ts files there would be too.
  const tsc = spawnSync(
    process.execPath,
    [
      join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'),
      '-p',
      'tsconfig.build.json',
      '--outDir',
      out,
    ].concat(['--declaration', 'false', '--declarationMap', 'false', '--sourceMap', 'false']),
    { cwd: ROOT, encoding: 'utf8' },
  );
  // tsc emits despite type errors elsewhere in the tree; only a missing output is fatal.
  if (!existsSync(main)) {
    process.stderr.write(`tsc did not produce ${main}:\n${tsc.stdout}${tsc.stderr}`);
    process.exit(1);
  }
  return main;
}

const { path, distinct } = await dataset();
const size = statSync(path).size;
console.log(
  `dedup-cli: ${fmt(lines)} lines, ${fmt(distinct)} distinct (${(duplicateShare * 100).toFixed(0)}% duplicates), ${(
    size / 1e6
  ).toFixed(0)} MB, node ${process.version}`,
);

let baseline: Measured | undefined;
if (!values['no-baseline']) {
  baseline = await measure(process.execPath, ['-e', BASELINE, path]);
  console.log(
    `  baseline (read + JSON.parse + write, no dedup): ${fmt(lines / baseline.seconds)} lines/s, ` +
      `${baseline.seconds.toFixed(1)} s${cpu(baseline)}, peak RSS ${baseline.peakRssMb} MB`,
  );
}

const store = await mkdtemp(join(tmpdir(), 'idem-bench-store-'));
try {
  const batch = values['batch-size'] ? ['--batch-size', values['batch-size']] : [];
  const audit = values.duplicates ? ['--duplicates', `${store}-duplicates.ndjson`] : [];
  const entry = values['from-source'] ? join(ROOT, 'bin', 'idem.js') : compiledCli();
  const cli = await measure(process.execPath, [
    entry,
    'dedup',
    '--id',
    'id',
    '--store',
    store,
    '--no-progress',
    ...batch,
    ...audit,
    path,
  ]);
  if (cli.code !== 0) {
    // A run that failed measured nothing: no figures, and the report shows the bench as failed.
    console.log(`  idem dedup exited ${cli.code}:\n${cli.stderr}`);
    process.exit(1);
  }
  const rate = lines / cli.seconds;
  console.log(
    `  idem dedup (${values['from-source'] ? 'from source via tsx' : 'compiled'}, rocksdb store${values.duplicates ? ', --duplicates' : ''}, wall time incl. startup): ` +
      `${fmt(rate)} lines/s, ${cli.seconds.toFixed(1)} s` +
      `${cpu(cli)}, peak RSS ${cli.peakRssMb} MB`,
  );
  console.log(`  ${cli.stderr.trim().split('\n').pop()}`);
  console.log(`  RSS at each tenth of the run (MB): ${cli.rssMb.join(' ')}`);
  sink.figure('idem dedup', rate, 'lines/s');
  sink.figure('idem dedup peak RSS', cli.peakRssMb, 'MB');
  // Flat: the last tenth's RSS within 10 % of the second tenth's (issue 9).
  const second = cli.rssMb[1];
  const last = cli.rssMb[cli.rssMb.length - 1];
  const growth = second !== undefined && last !== undefined && second > 0 ? last / second : undefined;
  let throughputRatio: number | undefined;
  if (baseline) {
    throughputRatio = rate / (lines / baseline.seconds);
    sink.figure('baseline: read + JSON.parse + write', lines / baseline.seconds, 'lines/s');
    sink.ratio({
      id: 'cli.throughput-vs-baseline',
      label: 'idem dedup throughput',
      value: throughputRatio,
      target: 0.6,
      kind: 'min',
      baseline: 'read + JSON.parse + write, same input',
    });
    const cpuRatio =
      baseline.cpuSeconds && cli.cpuSeconds
        ? `, CPU per line ${(cli.cpuSeconds / baseline.cpuSeconds).toFixed(1)}x`
        : '';
    console.log(`  ratio idem/baseline: throughput ${throughputRatio.toFixed(2)}${cpuRatio}`);
  }
  if (growth !== undefined) {
    sink.ratio({
      id: 'cli.rss-growth',
      label: 'idem dedup RSS, last tenth / second tenth',
      value: growth,
      target: 1.1,
      kind: 'max',
      baseline: 'its own RSS at the second tenth of the run',
    });
  }
  console.log(
    `  targets: throughput >= 0.6x the baseline (${
      throughputRatio === undefined ? 'not measured' : throughputRatio >= 0.6 ? 'met' : 'missed'
    }), peak RSS <= 300 MB (${cli.peakRssMb <= 300 ? 'met' : 'missed'}), flat: last tenth within 10% of the second (${
      growth === undefined ? 'not measured' : growth <= 1.1 ? 'met' : `missed, ${growth.toFixed(2)}x`
    })`,
  );
  sink.write(values.json);
} finally {
  await rm(store, { recursive: true, force: true });
  await rm(`${store}-duplicates.ndjson`, { force: true });
}
