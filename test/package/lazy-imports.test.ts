import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cleanEnv, installedProject } from './pack.js';

/** Packages a user of the consumer and one store must not pay for: the CLI's, the node's, the DI container's. */
const forbidden = [
  'tsyringe',
  'reflect-metadata',
  'commander',
  'cli-progress',
  'pino',
  'prom-client',
  'kafkajs',
  '@platformatic/kafka',
  'cassandra-driver',
  'mysql2',
  '@aws-sdk/client-dynamodb',
  '@nxtedition/rocksdb',
  'pg',
];

// ESM loads go through the loader hooks (run off-thread, hence the log file); CommonJS loads, including the
// require() calls inside CommonJS packages, land in require.cache, read at exit.
const hooks = `
import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  appendFileSync(process.env.LOADED_LOG, url + '\\n');
  return next(url, context);
}
`;
const register = `
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
register(new URL('./hooks.mjs', import.meta.url));
process.on('exit', () => {
  appendFileSync(process.env.LOADED_LOG, Object.keys(createRequire(import.meta.url).cache).join('\\n') + '\\n');
});
`;

/** The npm packages (by name) a program loaded. */
function packagesLoaded(project: string, args: string[]): Set<string> {
  writeFileSync(join(project, 'hooks.mjs'), hooks);
  writeFileSync(join(project, 'register.mjs'), register);
  const log = join(project, 'loaded.log');
  rmSync(log, { force: true });
  writeFileSync(log, '');
  execFileSync(process.execPath, ['--import', './register.mjs', ...args], {
    cwd: project,
    env: cleanEnv({ LOADED_LOG: log }),
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const names = new Set<string>();
  for (const line of readFileSync(log, 'utf8').split('\n')) {
    const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(decodeURIComponent(line));
    if (match?.[1]) names.add(match[1]);
  }
  return names;
}

function assertLean(names: Set<string>): void {
  // The probe must see the store's client, or it saw nothing at all.
  assert.ok(names.has('ioredis'), `ioredis was not seen loading: ${[...names].join(', ')}`);
  assert.ok(names.has('idempotent-consumer'));
  const loaded = forbidden.filter((name) => names.has(name));
  assert.deepEqual(loaded, [], `loaded by importing the consumer and the Redis store: ${loaded.join(', ')}`);
}

describe('a user of the consumer and the Redis store (packed tarball)', () => {
  it('loads none of the CLI, node or DI packages through import', () => {
    const project = installedProject('full');
    assertLean(
      packagesLoaded(project, [
        '--input-type=module',
        '-e',
        "await import('idempotent-consumer'); await import('idempotent-consumer/redis');",
      ]),
    );
  });

  it('loads none of the CLI, node or DI packages through require', () => {
    const project = installedProject('full');
    assertLean(
      packagesLoaded(project, [
        '--input-type=commonjs',
        '-e',
        "require('idempotent-consumer'); require('idempotent-consumer/redis');",
      ]),
    );
  });
});

// `@opentelemetry/api` is an optional peer the user passes in (`telemetry: { api }`): the package never loads it,
// so every entry point works where it is not installed. (The default install has it anyway, through prom-client:
// here it is hidden from the resolver, as on a machine without it.)
const HIDE_ESM = fileURLToPath(new URL('../helpers/hide-packages/register.mjs', import.meta.url));
const HIDE_CJS = `
const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request.startsWith('@opentelemetry/')) {
    throw Object.assign(new Error("Cannot find module '" + request + "'"), { code: 'MODULE_NOT_FOUND' });
  }
  return resolve.call(this, request, ...rest);
};
`;

describe('OpenTelemetry, an optional peer (packed tarball)', () => {
  it('no built file loads it, and every entry point imports and requires where it cannot be resolved', () => {
    const project = installedProject('full');
    const installed = join(project, 'node_modules/idempotent-consumer');
    // An import or export statement, a dynamic import or a require of it (not a mention in a message's text).
    const loads =
      /^\s*(?:import|export)\b[^;'"]*\bfrom\s*['"]@opentelemetry\/|\b(?:import|require)\(\s*['"]@opentelemetry\//m;
    const js = readdirSync(join(installed, 'dist'), { recursive: true, encoding: 'utf8' }).filter((f) =>
      /\.[cm]?js$/.test(f),
    );
    assert.ok(js.length > 100, `${js.length} built files`);
    const culprits = js.filter((f) => loads.test(readFileSync(join(installed, 'dist', f), 'utf8')));
    assert.deepEqual(culprits, [], 'built files that load @opentelemetry');

    const { exports } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      exports: Record<string, unknown>;
    };
    const entries = JSON.stringify(
      Object.keys(exports)
        .filter((e) => e !== './package.json')
        .map((e) => (e === '.' ? 'idempotent-consumer' : `idempotent-consumer/${e.slice(2)}`)),
    );
    writeFileSync(join(project, 'hide-otel.cjs'), HIDE_CJS);
    // Each run tells which entry points failed to load, and why, and whether @opentelemetry/api was in reach.
    const run = (type: string, load: string) => {
      const code = `(async () => {
        const failed = {};
        for (const e of ${entries}) try { await ${load}(e); } catch (error) { failed[e] = String(error); }
        const reachable = await Promise.resolve().then(() => ${load}('@opentelemetry/api')).then(() => true, () => false);
        console.log(JSON.stringify({ failed, reachable }));
      })();`;
      const out = execFileSync(
        process.execPath,
        ['--import', HIDE_ESM, '--require', './hide-otel.cjs', `--input-type=${type}`, '-e', code],
        { cwd: project, env: cleanEnv({ IDEM_TEST_HIDE_PACKAGES: '@opentelemetry/api' }), encoding: 'utf8' },
      );
      return JSON.parse(out) as { failed: Record<string, string>; reachable: boolean };
    };
    for (const [type, load] of [
      ['module', 'import'],
      ['commonjs', 'require'],
    ] as const) {
      const { failed, reachable } = run(type, load);
      assert.equal(reachable, false, `${type}: @opentelemetry/api is not hidden`);
      // A store's entry point needs its client, a peer this project did not install; nothing needs OTel.
      for (const [entry, error] of Object.entries(failed)) {
        assert.doesNotMatch(error, /opentelemetry/, `${type}: ${entry}`);
        assert.match(error, /Cannot find (module|package)/, `${type}: ${entry}`);
      }
      for (const entry of ['idempotent-consumer', 'idempotent-consumer/http', 'idempotent-consumer/kafka']) {
        assert.equal(failed[entry], undefined, `${type}: ${entry} failed to load`);
      }
    }
  });
});
