/**
 * The package as a user receives it: built into a cache directory (never the checkout's dist/), packed with
 * `npm pack`, and installed into fresh projects under os.tmpdir(). Building and installing take a minute, so the
 * results are cached under a hash of everything that goes into the tarball; the package tests share them, and the
 * CLI tests run the same build ({@link builtCheckout}).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository checkout. */
export const root = fileURLToPath(new URL('../..', import.meta.url));

const cacheRoot = join(tmpdir(), 'idem-package-tests');

/** What the tarball is made of; a change to any of it means a new build. */
const inputs = [
  'package.json',
  'README.md',
  'LICENSE',
  'tsconfig.json',
  'tsconfig.build.json',
  'tsconfig.build.cjs.json',
  'scripts/build.mjs',
  'examples',
  'bin',
  'docs',
  'src',
];

/** The npm environment of `npm test` (npm_config_*, npm_package_*) must not leak into the user's npm runs. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (!/^npm_/i.test(key) && key !== 'NODE_OPTIONS' && key !== 'NODE_TEST_CONTEXT') env[key] = value;
  }
  return { ...env, ...extra };
}

function files(path: string): string[] {
  const full = join(root, path);
  if (!existsSync(full)) return [];
  if (!statSync(full).isDirectory()) return [path];
  return readdirSync(full, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .sort();
}

/** A hash of the inputs; `salt` first (the running Node, for what npm installs: see cacheDir). */
function inputHash(salt = ''): string {
  const hash = createHash('sha256');
  hash.update(`${salt}\0`);
  for (const path of inputs.flatMap(files)) {
    hash
      .update(path)
      .update('\0')
      .update(readFileSync(join(root, path)))
      .update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

let entry: string | undefined;

/** This source state's cache directory; those of other states are removed after an hour. */
function cacheDir(): string {
  // npm picks dependency versions by the running Node (engines: @platformatic/kafka 2.x on Node >= 22.22, 1.x
  // on Node 20), so a project installed under one Node is not the project of another.
  entry ??= freshEntry(cacheRoot, inputHash(`node ${process.version}`));
  return entry;
}

/** `parent/hash`, made; other source states' entries go once nobody can still be using them. */
function freshEntry(parent: string, hash: string): string {
  mkdirSync(parent, { recursive: true });
  // Another checkout, or another test file of this one, may be testing an older state in parallel: an hour's grace.
  for (const name of readdirSync(parent)) {
    const other = join(parent, name);
    // Another process may be removing it right now: gone is as good as removed.
    const modified = statSync(other, { throwIfNoEntry: false })?.mtimeMs ?? Date.now();
    if (name !== hash && !name.endsWith('.lock') && Date.now() - modified > 3_600_000)
      rmSync(other, { recursive: true, force: true });
  }
  const dir = join(parent, hash);
  mkdirSync(dir, { recursive: true });
  return dir;
}

let checkout: string | undefined;

/**
 * This source state built once (`scripts/build.mjs`, as `npm run build` and the tarball build it), shared by every
 * test file and every Node that runs them: a directory holding the build's `dist/` and the files it reads at run
 * time (package.json, examples/). It lies inside the checkout's node_modules/, so the build resolves its
 * dependencies from the checkout's, as dist/ does. The CLI tests run its `dist/cli/main.js`: a plain `node` start,
 * where running the source through tsx costs every spawned CLI a loader and a compile check.
 */
export function builtCheckout(): string {
  // The build does not depend on the Node that runs it: one for Node 20 and 24 alike.
  checkout ??= freshEntry(join(root, 'node_modules/.cache/idem-build'), inputHash());
  const dir = checkout;
  const done = join(dir, '.ready');
  if (existsSync(done)) return dir;
  return withLock(`${dir}.lock`, () => {
    if (existsSync(done)) return dir;
    // The build runs on the Node that runs this file; a failed build (a type error) shows tsc's output here.
    execFileSync(process.execPath, [join(root, 'scripts/build.mjs'), join(dir, 'dist')], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    for (const path of ['package.json', 'examples'])
      cpSync(join(root, path), join(dir, path), { recursive: true });
    writeFileSync(done, '');
    return dir;
  });
}

/** A lock older than this was left by a killed process (a build and an install take a few minutes). */
const STALE_LOCK_MS = 900_000;

/**
 * Runs `fn` holding the lock `path` (a directory: mkdir is atomic), so test files running side by side build the
 * tarball and install each project once, instead of one removing what another is installing.
 */
function withLock<T>(path: string, fn: () => T): T {
  for (;;) {
    try {
      mkdirSync(path);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    try {
      if (Date.now() - statSync(path).mtimeMs > STALE_LOCK_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // Released meanwhile: try again.
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 250);
  }
  try {
    return fn();
  } finally {
    rmSync(path, { recursive: true, force: true });
  }
}

/** The packed tarball (`npm pack` of a fresh build), built once per source state. */
export function packedTarball(): string {
  const dir = cacheDir();
  const done = join(dir, 'tarball.txt');
  if (existsSync(done)) return readFileSync(done, 'utf8');
  return withLock(join(dir, 'tarball.lock'), () =>
    existsSync(done) ? readFileSync(done, 'utf8') : buildTarball(dir, done),
  );
}

function buildTarball(dir: string, done: string): string {
  const stage = mkdtempSync(join(tmpdir(), 'idem-stage-'));
  try {
    // What npm packs: package.json's `files` (dist: the shared build) and the files npm always includes.
    const { files: shipped } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      files: string[];
    };
    for (const path of ['package.json', 'README.md', 'LICENSE', ...shipped.filter((f) => f !== 'dist')]) {
      cpSync(join(root, path), join(stage, path), { recursive: true });
    }
    cpSync(join(builtCheckout(), 'dist'), join(stage, 'dist'), { recursive: true });
    // --ignore-scripts: prepare would build again, with the stage's own (absent) scripts/.
    const out = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {
      cwd: stage,
      encoding: 'utf8',
      env: cleanEnv(),
    });
    const [{ filename }] = JSON.parse(out) as [{ filename: string }];
    const tarball = join(dir, filename);
    writeFileSync(done, tarball);
    return tarball;
  } finally {
    rmSync(stage, { recursive: true, force: true });
  }
}

/** The version of a package in the repository's node_modules, so a test installs it from the npm cache. */
export function installedVersion(name: string): string {
  return (
    JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }
  ).version;
}

/**
 * A fresh project with the packed tarball and ioredis installed, as a Redis user has it: `full` with the optional
 * dependencies (the RocksDB binding, the CLI's, the node's and the DI container's packages), `no-optional`
 * installed with `--omit=optional` (a library-only install), `no-optional-cli` the same plus the CLI's two
 * packages named explicitly (the CLI without the native binding), `typed-clients` library-only with Express, pg
 * and their `@types` (no fastify: an Express user's project). Created once per source state.
 */
export function installedProject(kind: 'full' | 'no-optional' | 'no-optional-cli' | 'typed-clients'): string {
  const tarball = packedTarball();
  const project = join(cacheDir(), kind);
  const ready = join(project, '.ready');
  if (existsSync(ready)) return project;
  return withLock(`${project}.lock`, () => (existsSync(ready) ? project : install(kind, tarball, project)));
}

function install(kind: string, tarball: string, project: string): string {
  const ready = join(project, '.ready');
  rmSync(project, { recursive: true, force: true });
  mkdirSync(project, { recursive: true });
  writeFileSync(
    join(project, 'package.json'),
    `${JSON.stringify({ name: `probe-${kind}`, private: true })}\n`,
  );
  npm(project, [
    'install',
    tarball,
    `ioredis@${installedVersion('ioredis')}`,
    ...(kind === 'no-optional-cli'
      ? [`commander@${installedVersion('commander')}`, `cli-progress@${installedVersion('cli-progress')}`]
      : []),
    ...(kind === 'typed-clients'
      ? ['express', '@types/express', 'pg', '@types/pg'].map((name) => `${name}@${installedVersion(name)}`)
      : []),
    ...(kind === 'full' ? [] : ['--omit=optional']),
  ]);
  writeFileSync(ready, '');
  return project;
}

/** Runs npm as a user would, preferring the local cache so the test needs the registry only for cache misses. */
export function npm(cwd: string, args: string[]): string {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], {
    cwd,
    encoding: 'utf8',
    env: cleanEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}
