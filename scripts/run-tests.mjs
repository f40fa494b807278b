#!/usr/bin/env node
// Runs test files concurrently, each in its own `node --test` process, and reports per file. scripts/test.sh calls it
// for `npm test`. Why not `node --test --test-concurrency=N` alone: on Node 20 its TAP output loses which file a test
// came from and how long each file took, and it starts files in name order, so the slowest file may start last and
// set the run's length. Here the files start slowest first (times from scripts/test-timings.json), each file's
// output is printed in one piece when it ends, and the run ends with the ten slowest files and the totals.
//
//   node scripts/run-tests.mjs [--concurrency N] [--save-timings] [node --test options] [files...]
//
// A run of the whole suite (no files, no node --test options) saves each passed file's time to
// scripts/test-timings.json, so the next run's order follows the suite as it is; --save-timings saves a partial run's.
//
// Kafka clients: a file whose tests run the package's Kafka code on the client IDEM_KAFKA_CLIENT names (it calls one
// of the helpers in CLIENT_HELPERS below; a test helper that wraps one is listed too) runs once per client in
// IDEM_TEST_KAFKA_CLIENTS (default: both), each run with IDEM_KAFKA_CLIENT set; a file that does not depend on the client, or pins one itself (the comment
// `@kafka-client-pinned`), runs once. So every Kafka behaviour is proven on both clients in one pool, once each.
//
// A second Node (CI: the suite on Node 24, and what supports Node 20 on Node 20): IDEM_TEST_SERVER_FREE_NODE names
// another `node` binary, and every file with a test that needs no server runs on it once more in the same pool,
// with every server opted out (IDEM_SKIP_STORES=all, endpoints that refuse), so the server-free tests run on both
// Nodes without a second pass.
//
// Environment: IDEM_TEST_CONCURRENCY (default 3), IDEM_TEST_KAFKA_CLIENTS (default kafkajs,platformatic),
// IDEM_TEST_SERVER_FREE_NODE (unset: none), IDEM_TEST_LOG_DIR (default .test-logs: one TAP log per run of a file),
// IDEM_TEST_TIMEOUT_MS (per test, default 900000).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TIMINGS = join(ROOT, 'scripts/test-timings.json');

const args = process.argv.slice(2);
let concurrency = Number(process.env.IDEM_TEST_CONCURRENCY ?? 3);
let saveTimings = false;
const nodeOptions = [];
const files = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--concurrency') concurrency = Number(args[++i]);
  else if (a.startsWith('--concurrency=')) concurrency = Number(a.slice('--concurrency='.length));
  else if (a === '--save-timings') saveTimings = true;
  else if (a.startsWith('-')) nodeOptions.push(a);
  else files.push(a);
}
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(
    `run-tests: --concurrency (or IDEM_TEST_CONCURRENCY) must be a whole number ≥ 1, not ${concurrency}`,
  );
  process.exit(2);
}

function findTests(dir) {
  const found = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...findTests(path));
    else if (entry.name.endsWith('.test.ts')) found.push(relative(ROOT, path));
  }
  return found;
}
const selected = (
  files.length ? files.map((f) => relative(ROOT, resolve(f))) : findTests(join(ROOT, 'test'))
).sort();
for (const f of selected) statSync(join(ROOT, f)); // a missing file fails here, naming it

/** The test helpers that read IDEM_KAFKA_CLIENT (test/helpers/kafka.ts, test/helpers/node.ts). */
const CLIENT_HELPERS =
  /\b(testKafkaClientName|testConnection|testClient|onTestClient|testPortAdmin|nodeConfig|exactlyOnceChangelogTestbed)\(/;
const clients = (process.env.IDEM_TEST_KAFKA_CLIENTS ?? 'kafkajs,platformatic').split(',').filter(Boolean);
const kafkaSkipped =
  /^(1|true|yes)$/i.test(process.env.IDEM_SKIP_KAFKA ?? '') ||
  /(^|,)(kafka|all)(,|$)/.test(process.env.IDEM_SKIP_STORES ?? '');
/** One run of one file: `{ file, client }`, client undefined for a file that runs once. */
const runs = selected.flatMap((file) => {
  const source = readFileSync(join(ROOT, file), 'utf8');
  const perClient =
    !process.env.IDEM_KAFKA_CLIENT &&
    !kafkaSkipped &&
    CLIENT_HELPERS.test(source) &&
    !source.includes('@kafka-client-pinned');
  // One client named is still a choice: its runs get IDEM_KAFKA_CLIENT, and say so, like each of two would.
  return perClient ? clients.map((client) => ({ file, client })) : [{ file, client: undefined }];
});

/**
 * A file whose every top-level block is skipped without its server (`describe('…', { skip:
 * skipUnlessEnabled('kafka') }, …)` and the like) would pass nothing on the server-free Node, only load its imports:
 * it does not run there. A file with any other top-level block does (the check errs towards running).
 */
function serverOnly(source) {
  const blocks = source.match(/^(describe|it|test)\(.*$/gm) ?? [];
  return (
    blocks.length > 0 &&
    blocks.every((line) =>
      /\{ skip: skipUnlessEnabled\('(kafka|postgres|cassandra|redis|mysql|dynamodb)'\)\s*[,}]/.test(line),
    )
  );
}

/** The other Node's major and its runs: every file once, no server (see the file comment). */
const serverFreeNode = process.env.IDEM_TEST_SERVER_FREE_NODE || undefined;
let serverFreeMajor;
if (serverFreeNode) {
  const version = spawnSync(serverFreeNode, ['--version'], { encoding: 'utf8' });
  if (version.status !== 0) {
    console.error(
      `run-tests: IDEM_TEST_SERVER_FREE_NODE=${serverFreeNode} does not run: ${version.stderr || version.error}`,
    );
    process.exit(2);
  }
  serverFreeMajor = version.stdout.trim().replace(/^v(\d+).*$/s, '$1');
  for (const file of selected) {
    if (!serverOnly(readFileSync(join(ROOT, file), 'utf8')))
      runs.push({ file, client: undefined, serverFree: true });
  }
}
const SERVER_FREE_ENV = {
  IDEM_SKIP_STORES: 'all',
  IDEM_SKIP_KAFKA: '1',
  // Nothing answers here, so a test that needs a server and ignores the opt-out fails loudly.
  REDIS_URL: 'redis://127.0.0.1:1',
  DYNAMODB_ENDPOINT: 'http://127.0.0.1:1',
  CASSANDRA_CONTACT_POINTS: '127.0.0.1:1',
  KAFKA_BROKERS: '127.0.0.1:1',
  POSTGRES_URL: 'postgres://idem:idem@127.0.0.1:1/idem',
  MYSQL_URL: 'mysql://idem:idem@127.0.0.1:1/idem',
};
const label = (run) =>
  run.serverFree
    ? `${run.file} [node ${serverFreeMajor}, no servers]`
    : run.client
      ? `${run.file} [${run.client}]`
      : run.file;
/** The command and environment of one run. */
function spawnArgs(run) {
  if (run.serverFree) {
    const path = `${dirname(serverFreeNode)}${delimiter}${process.env.PATH ?? ''}`;
    return { node: serverFreeNode, env: { ...process.env, ...SERVER_FREE_ENV, PATH: path } };
  }
  return {
    node: process.execPath,
    env: run.client ? { ...process.env, IDEM_KAFKA_CLIENT: run.client } : process.env,
  };
}

/** Seconds per file from earlier runs; a file not listed is assumed to take the median. */
let known = {};
try {
  known = JSON.parse(readFileSync(TIMINGS, 'utf8'));
} catch {
  // No timings yet: name order.
}
const knownTimes = Object.values(known).sort((a, b) => a - b);
const median = knownTimes[Math.floor(knownTimes.length / 2)] ?? 10;
// A server-free run not timed yet is assumed short: most of its file's tests are skipped.
const estimate = (run) => known[label(run)] ?? (run.serverFree ? 5 : (known[run.file] ?? median));
// Longest first: the run then ends close to total / concurrency instead of waiting on a long file started last.
const queue = [...runs].sort((a, b) => estimate(b) - estimate(a) || label(a).localeCompare(label(b)));

const logDir = join(ROOT, process.env.IDEM_TEST_LOG_DIR ?? '.test-logs');
mkdirSync(logDir, { recursive: true });
const timeoutMs = process.env.IDEM_TEST_TIMEOUT_MS ?? '900000';

const results = [];
const started = Date.now();

/** The counts node's TAP reporter prints at its end (`# pass 12`). */
function counts(tap) {
  const count = (name) => {
    const m = new RegExp(`^# ${name} (\\d+)$`, 'm').exec(tap);
    return m ? Number(m[1]) : 0;
  };
  return {
    tests: count('tests'),
    pass: count('pass'),
    fail: count('fail'),
    cancelled: count('cancelled'),
    skipped: count('skipped'),
    todo: count('todo'),
  };
}

function runFile(run) {
  const { file, client } = run;
  const { node, env } = spawnArgs(run);
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn(
      node,
      [
        '--import',
        'tsx',
        '--test',
        '--test-reporter=tap',
        `--test-timeout=${timeoutMs}`,
        ...nodeOptions,
        file,
      ],
      {
        cwd: ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
        env,
      },
    );
    const chunks = [];
    child.stdout.on('data', (c) => chunks.push(c));
    child.stderr.on('data', (c) => chunks.push(c));
    child.on('close', (code, signal) => {
      const seconds = (Date.now() - t0) / 1000;
      const tap = Buffer.concat(chunks).toString();
      const suffix = run.serverFree ? `.node${serverFreeMajor}` : client ? `.${client}` : '';
      const logFile = join(logDir, `${file.replace(/[/\\]/g, '__')}${suffix}.tap`);
      writeFileSync(logFile, tap);
      const c = counts(tap);
      // A file that exited non-zero without a failed test (a crash, a syntax error) counts as one failure.
      const failed = c.fail + c.cancelled > 0 || code !== 0;
      resolve({ file: label(run), seconds, code, signal, tap, logFile, ...c, failed });
    });
  });
}

const pad = (s, n) => String(s).padStart(n);
let done = 0;
async function worker() {
  for (let run = queue.shift(); run !== undefined; run = queue.shift()) {
    const r = await runFile(run);
    results.push(r);
    done++;
    const head = `[${pad(done, 3)}/${runs.length}] ${r.failed ? 'FAIL' : 'ok  '} ${r.file} (${r.seconds.toFixed(1)} s, ${r.pass} passed${r.skipped ? `, ${r.skipped} skipped` : ''}${r.fail + r.cancelled ? `, ${r.fail + r.cancelled} failed` : ''})`;
    if (r.failed) {
      // The whole file's output, so the CI log shows the failure in context.
      process.stdout.write(`\n${head}\n${r.tap.replace(/^/gm, '  | ')}\n`);
      if (r.code !== 0 && r.fail + r.cancelled === 0) {
        process.stdout.write(
          `  | the file's process exited with ${r.signal ?? `code ${r.code}`} without a failed test\n`,
        );
      }
    } else {
      process.stdout.write(`${head}\n`);
    }
  }
}

const twice =
  runs.filter((r) => r.client !== undefined).length - runs.filter((r) => r.client === clients[0]).length;
console.log(
  `run-tests: ${selected.length} files on Node ${process.versions.node}` +
    `${twice ? ` (${twice} of them once per Kafka client: ${clients.join(', ')})` : ''}` +
    `${serverFreeNode ? `, and ${runs.filter((r) => r.serverFree).length} of them again on Node ${serverFreeMajor} without servers` : ''}, ` +
    `${concurrency} at a time, slowest first; per-file TAP in ${relative(ROOT, logDir)}/`,
);
await Promise.all(Array.from({ length: Math.min(concurrency, runs.length) }, worker));

const wall = (Date.now() - started) / 1000;
const sum = (k) => results.reduce((n, r) => n + r[k], 0);
const failedFiles = results.filter((r) => r.failed);
console.log('\nslowest files:');
for (const r of [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 10)) {
  console.log(`  ${pad(r.seconds.toFixed(1), 7)} s  ${r.file}`);
}
if (failedFiles.length) {
  console.log(`\nfailed files (${failedFiles.length}):`);
  for (const r of failedFiles) {
    console.log(`  ${r.file} (log: ${relative(ROOT, r.logFile)})`);
    const blocks = spawnSync(process.execPath, [join(ROOT, 'scripts/tap-failures.mjs'), r.logFile], {
      encoding: 'utf8',
    });
    process.stdout.write(`${blocks.stdout}`.replace(/^/gm, '    ').trimEnd() + '\n');
  }
}
// A failed file's time (a crash, a hang cut short) says nothing about its next run: its earlier time stays.
if (saveTimings || (files.length === 0 && nodeOptions.length === 0)) {
  const timings = { ...known };
  for (const r of results) if (!r.failed) timings[r.file] = Math.round(r.seconds * 10) / 10;
  const sorted = Object.fromEntries(Object.entries(timings).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(TIMINGS, `${JSON.stringify(sorted, null, 2)}\n`);
  console.log(`\nrun-tests: timings saved to ${relative(ROOT, TIMINGS)}`);
}
const failedCount =
  sum('fail') + sum('cancelled') + failedFiles.filter((r) => r.fail + r.cancelled === 0).length;
console.log(
  `\nrun-tests: ${results.length} runs of ${selected.length} files in ${wall.toFixed(0)} s (${concurrency} at a time; ${sum('seconds').toFixed(0)} s of file time)`,
);
// The closing line CI reads: 'N passed, N failed' alone on a line.
console.log(`tests: ${sum('pass')} passed, ${failedCount} failed, ${sum('skipped')} skipped`);
process.exit(failedFiles.length ? 1 : 0);
