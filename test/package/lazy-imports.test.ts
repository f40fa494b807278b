import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
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
