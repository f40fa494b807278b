import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  createTopic,
  endOffsets,
  kafkaAdmin,
  produce,
  randomName,
  testKafka,
  testProducer,
  waitFor,
} from '../helpers/kafka.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { cleanEnv, installedProject, installedVersion, npm, root } from './pack.js';

// Issue 20, §1: how the package installs today (a packed tarball, git), what a library-only install weighs,
// and what an unbuilt copy says.

/** Bytes of the files under `dir` (apparent size, what npm's "unpacked size" counts) and their 4 KiB blocks. */
function sizeOf(dir: string): { bytes: number; blocks: number } {
  let bytes = 0;
  let blocks = 0;
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const stat = lstatSync(join(entry.parentPath, entry.name));
    if (!stat.isFile()) continue;
    bytes += stat.size;
    blocks += Math.ceil(stat.size / 4096);
  }
  return { bytes, blocks };
}

/** The packages installed in a project's node_modules, by name. */
function installed(project: string): string[] {
  const modules = join(project, 'node_modules');
  return readdirSync(modules)
    .filter((name) => !name.startsWith('.'))
    .flatMap((name) =>
      name.startsWith('@') ? readdirSync(join(modules, name)).map((n) => `${name}/${n}`) : [name],
    )
    .sort();
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(2)} MB`;

describe('a library-only install (--omit=optional + ioredis, packed tarball)', () => {
  it('holds the library, zod, smol-toml and ioredis only: none of the CLI, node or DI packages', (t) => {
    const project = installedProject('no-optional');
    for (const name of ['commander', 'cli-progress', 'pino', 'prom-client', 'tsyringe', 'reflect-metadata']) {
      assert.equal(
        existsSync(join(project, 'node_modules', name)),
        false,
        `${name} in a library-only install`,
      );
    }
    // Everything installed is the library's `dependencies` or ioredis's, and what those depend on.
    const wanted = new Set<string>();
    const visit = (name: string) => {
      if (wanted.has(name)) return;
      wanted.add(name);
      const manifest = JSON.parse(
        readFileSync(join(project, 'node_modules', name, 'package.json'), 'utf8'),
      ) as {
        dependencies?: Record<string, string>;
      };
      for (const dep of Object.keys(manifest.dependencies ?? {})) visit(dep);
    };
    visit('idempotent-consumer');
    visit('ioredis');
    assert.deepEqual(
      installed(project).filter((name) => !wanted.has(name)),
      [],
      'installed beyond the library, its dependencies and ioredis',
    );
    const manifest = JSON.parse(
      readFileSync(join(project, 'node_modules/idempotent-consumer/package.json'), 'utf8'),
    ) as { dependencies: Record<string, string> };
    assert.deepEqual(Object.keys(manifest.dependencies).sort(), ['smol-toml', 'zod']);
    const total = sizeOf(join(project, 'node_modules'));
    const own = sizeOf(join(project, 'node_modules/idempotent-consumer'));
    const zod = sizeOf(join(project, 'node_modules/zod'));
    // Figures, not a gate: zod's and ioredis's sizes are theirs. Issue 20's target is 10 MB; main had 16.5 MB
    // (24 MB on disk).
    t.diagnostic(
      `node_modules ${mb(total.bytes)} (${mb(total.blocks * 4096)} in 4 KiB blocks); idempotent-consumer ` +
        `${mb(own.bytes)}, zod ${mb(zod.bytes)} (${mb(zod.blocks * 4096)} in blocks)`,
    );
    // A guard against bloat, not a user target: 3.04 MB at 9a0ea3b (two builds, ESM and CJS, of a larger src/ and
    // its docs). Raised from 3 MB; shrinking the emitted JavaScript (comments) is the way back under it.
    assert.ok(own.bytes < 3.2e6, `the package itself unpacks to ${mb(own.bytes)}`);
  });

  it('the default install has what idem dedup and idem node need, and both start', () => {
    const project = installedProject('full');
    for (const name of ['commander', 'cli-progress', 'pino', 'prom-client', 'tsyringe']) {
      assert.ok(existsSync(join(project, 'node_modules', name)), `${name} in the default install`);
    }
    // The default Kafka client comes with the package; kafkajs only when asked for.
    assert.equal(existsSync(join(project, 'node_modules/kafkajs')), false, 'kafkajs in the default install');
    // npm picks the line whose engines admit this Node: 2.x on Node >= 22.22, 1.x on 22.19-22.21. Below 22.19
    // 1.x's own dependencies (@platformatic/dynamic-buffer, wasm-utils) claim a newer Node, and npm leaves the
    // optional dependency out: idem node then names `npm install @platformatic/kafka@^1.35.0`.
    const manifest = join(project, 'node_modules/@platformatic/kafka/package.json');
    const wanted = expectedPlatformaticLine();
    if (wanted === undefined) {
      assert.equal(existsSync(manifest), false, `@platformatic/kafka on Node ${process.versions.node}`);
    } else {
      const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string };
      assert.equal(
        version.split('.')[0],
        wanted,
        `@platformatic/kafka ${version} on Node ${process.versions.node}`,
      );
    }
    const dir = mkdtempSync(join(project, 'node-'));
    try {
      const run = spawnSync('npx', ['--no', '--', 'idem', 'node'], {
        cwd: dir,
        encoding: 'utf8',
        env: cleanEnv({ IDEM_CONFIG: '' }),
      });
      // Its modules (pino, prom-client) loaded: it got as far as asking for a config.
      assert.equal(run.status, 2, run.stderr);
      assert.match(run.stderr, /^idem node: no config given/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** The @platformatic/kafka major a default install holds on this Node; undefined where npm leaves it out. */
function expectedPlatformaticLine(): string | undefined {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major > 22 || (major === 22 && minor >= 22)) return '2';
  return major === 22 && minor >= 19 ? '1' : undefined;
}

describe('idem node as installed (default install, packed tarball)', () => {
  it('deduplicates on the default client against the broker, with no kafkajs installed', {
    skip: skipUnlessEnabled('kafka'),
  }, async (t) => {
    const project = installedProject('full');
    assert.equal(existsSync(join(project, 'node_modules/kafkajs')), false, 'kafkajs in the default install');
    const bin = join(project, 'node_modules/idempotent-consumer/bin/idem.js');
    if (expectedPlatformaticLine() === undefined) {
      // Node < 22.19: no default client installed; the node says which line to install, before any broker.
      const env = {
        IDEM_CONFIG: '',
        IDEM__KAFKA__BROKERS: '["127.0.0.1:1"]',
        IDEM__INPUT__TOPIC: 'in',
        IDEM__OUTPUT__TOPIC: 'out',
        IDEM__DLQ__TOPIC: 'dlq',
        IDEM__DEDUP__ID: 'uid',
        IDEM__REPOSITORY__TYPE: 'memory',
      };
      const run = spawnSync(process.execPath, [bin, 'node'], {
        cwd: project,
        encoding: 'utf8',
        env: cleanEnv(env),
      });
      assert.equal(
        run.stderr,
        'idem node needs the npm package "@platformatic/kafka", which is not installed: ' +
          'npm install @platformatic/kafka@^1.35.0\n',
      );
      assert.equal(run.status, 3);
      return;
    }
    // The test's own instrumentation (topics, input, reading the end offsets) is the checkout's kafkajs.
    const kafka = testKafka();
    const admin = await kafkaAdmin(t, kafka);
    const input = await createTopic(t, admin, { partitions: 1, prefix: 'idem-installed-in' });
    const output = await createTopic(t, admin, { partitions: 1, prefix: 'idem-installed-out' });
    const dlq = await createTopic(t, admin, { partitions: 1, prefix: 'idem-installed-dlq' });
    const groupId = randomName('idem-installed');
    await produce(await testProducer(t, kafka), input, [
      { value: '{"uid":"a"}' },
      { value: '{"uid":"b"}' },
      { value: '{"uid":"a"}' },
    ]);
    const dir = mkdtempSync(join(project, 'node-run-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const config = join(dir, 'node.toml');
    writeFileSync(
      config,
      [
        '[kafka]',
        `brokers = ["${endpoints.kafkaBrokers[0]}"]`,
        'sessionTimeout = "6s"',
        '[input]',
        `topic = "${input}"`,
        `groupId = "${groupId}"`,
        'batchTimeout = "200ms"',
        '[output]',
        `topic = "${output}"`,
        '[dlq]',
        `topic = "${dlq}"`,
        '[dedup]',
        'id = "uid"',
        '[repository]',
        'type = "memory"',
        '[metrics]',
        'enabled = false',
        '',
      ].join('\n'),
    );
    // The installed bin itself (not through npx, which would not pass the signals on).
    const child = spawn(process.execPath, [bin, 'node', '--config', config], {
      cwd: dir,
      env: cleanEnv({ IDEM_CONFIG: '' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      log += text;
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      log += text;
    });
    const exited = new Promise<number | null>((resolve) => child.once('close', resolve));
    t.after(() => {
      if (child.exitCode === null) child.kill('SIGKILL');
    });
    await waitFor(async () => (await endOffsets(admin, output)).get(0) === 2, {
      timeoutMs: 60_000,
      what: () => `the installed node to write a and b to ${output}; its log:\n${log}`,
    });
    child.kill('SIGTERM');
    assert.equal(await exited, 0, log);
    assert.doesNotMatch(log, /kafkajs/, 'the node ran without kafkajs');
    assert.equal((await endOffsets(admin, dlq)).get(0), 0);
  });
});

describe('installing from git (npm runs prepare, which builds dist/)', () => {
  it('a fresh application installs the repository from git, imports it and runs npx idem dedup', {
    timeout: 600_000,
  }, (t) => {
    // The repository as a git remote: the files git tracks (and new ones not ignored), in one commit.
    const remote = mkdtempSync(join(tmpdir(), 'idem-git-remote-'));
    const app = mkdtempSync(join(tmpdir(), 'idem-git-app-'));
    t.after(() => {
      rmSync(remote, { recursive: true, force: true });
      rmSync(app, { recursive: true, force: true });
    });
    const env = cleanEnv();
    delete env.GIT_DIR;
    delete env.GIT_WORK_TREE;
    const git = (cwd: string, args: string[]) => execFileSync('git', args, { cwd, encoding: 'utf8', env });
    const files = git(root, ['ls-files', '--cached', '--others', '--exclude-standard'])
      .split('\n')
      .filter((f) => f !== '' && existsSync(join(root, f)));
    for (const file of files) {
      mkdirSync(join(remote, file, '..'), { recursive: true });
      cpSync(join(root, file), join(remote, file));
    }
    git(remote, ['init', '-q']);
    git(remote, ['add', '-A']);
    git(remote, ['-c', 'user.email=test@example.com', '-c', 'user.name=test', 'commit', '-qm', 'snapshot']);
    assert.equal(existsSync(join(remote, 'dist')), false, 'git holds no dist/');

    writeFileSync(
      join(app, 'package.json'),
      `${JSON.stringify({ name: 'app', private: true, type: 'module' })}\n`,
    );
    npm(app, ['install', `git+file://${remote}`, `ioredis@${installedVersion('ioredis')}`]);
    const pkg = join(app, 'node_modules/idempotent-consumer');
    assert.ok(existsSync(join(pkg, 'dist/index.js')), 'the git install was built');
    assert.equal(existsSync(join(pkg, 'src')), false, 'and ships what a tarball ships, no src/');

    const imported = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "import('idempotent-consumer').then((m) => console.log(typeof m.IdempotentConsumer))",
      ],
      { cwd: app, encoding: 'utf8', env: cleanEnv() },
    );
    assert.equal(imported.stdout.trim(), 'function', imported.stderr);
    copyFileSync(join(root, 'examples/events.ndjson'), join(app, 'events.ndjson'));
    const run = spawnSync('npx', ['--no', '--', 'idem', 'dedup', '--id', 'id', 'events.ndjson'], {
      cwd: app,
      encoding: 'utf8',
      env: cleanEnv(),
    });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.stdout.split('\n').filter(Boolean).length, 4);
  });
});

describe('a copy that is not built', () => {
  it('idem says so in one line, naming the copy and the fix', () => {
    const copy = mkdtempSync(join(tmpdir(), 'idem-unbuilt-'));
    try {
      for (const path of ['bin', 'package.json'])
        cpSync(join(root, path), join(copy, path), { recursive: true });
      const run = spawnSync(process.execPath, [join(copy, 'bin/idem.js'), 'dedup', '--id', 'id'], {
        cwd: tmpdir(),
        encoding: 'utf8',
        env: cleanEnv(),
      });
      assert.equal(run.status, 1);
      const lines = run.stderr.split('\n').filter(Boolean);
      assert.equal(lines.length, 1, run.stderr);
      assert.match(
        lines[0] ?? '',
        /^idem: this copy of idempotent-consumer \(.*\) is not built: it has no dist\//,
      );
      assert.match(lines[0] ?? '', /npm run build/);
    } finally {
      rmSync(copy, { recursive: true, force: true });
    }
  });

  it('npm install ../checkout of an unbuilt checkout links .bin/idem, which says the copy is not built', (t) => {
    // npm links a directory and runs its prepare without its dev dependencies: the build cannot run there, and
    // a prepare that failed aborted the install before npm linked .bin/idem (npx idem then asked the registry).
    const checkout = mkdtempSync(join(tmpdir(), 'idem-unbuilt-checkout-'));
    const app = mkdtempSync(join(tmpdir(), 'idem-unbuilt-link-'));
    t.after(() => {
      rmSync(checkout, { recursive: true, force: true });
      rmSync(app, { recursive: true, force: true });
    });
    for (const path of ['package.json', 'bin', 'scripts', 'src', 'tsconfig.json', 'tsconfig.build.json'])
      cpSync(join(root, path), join(checkout, path), { recursive: true });
    writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name: 'app', private: true })}\n`);
    npm(app, ['install', checkout]);
    assert.ok(existsSync(join(app, 'node_modules/.bin/idem')), 'npm linked .bin/idem');
    assert.equal(existsSync(join(checkout, 'dist')), false, 'the checkout is still unbuilt');
    const run = spawnSync('npx', ['--no', '--', 'idem', 'dedup', '--id', 'id'], {
      cwd: app,
      encoding: 'utf8',
      env: cleanEnv(),
    });
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, /^idem: this copy of idempotent-consumer \(.*\) is not built: it has no dist\//);
  });

  it('an import fails with ERR_MODULE_NOT_FOUND naming the missing dist/ file (README: build that copy)', () => {
    // No reasonable way to say more (see README "Install"): Node's `exports` never falls back on a missing file.
    const app = mkdtempSync(join(tmpdir(), 'idem-unbuilt-app-'));
    try {
      const copy = join(app, 'node_modules', 'idempotent-consumer');
      mkdirSync(copy, { recursive: true });
      cpSync(join(root, 'package.json'), join(copy, 'package.json'));
      writeFileSync(join(app, 'main.mjs'), "import { IdempotentConsumer } from 'idempotent-consumer';\n");
      const run = spawnSync(process.execPath, [join(app, 'main.mjs')], {
        cwd: app,
        encoding: 'utf8',
        env: cleanEnv(),
      });
      assert.equal(run.status, 1);
      assert.match(run.stderr, /ERR_MODULE_NOT_FOUND/);
      assert.match(run.stderr, /idempotent-consumer[/\\]dist[/\\]index\.js/);
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });
});
