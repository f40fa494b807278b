import assert from 'node:assert/strict';
import { closeSync, copyFileSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { memoryDefaults } from '../../src/repositories/memory/options.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { finished, idsOf, ROOT, runCli, startCli } from './run-cli.js';

const skip = skipUnlessEnabled('rocksdb');

// Every test owns its input files and its store, so they run side by side.
describe('idem dedup at the edges: ids, long lines, byte-order marks, failed writes, first run', {
  skip,
  concurrency: 4,
}, () => {
  let dir = '';
  let stores = 0;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-cli-edges-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const freshStore = () => join(dir, `store-${++stores}`);
  const file = (name: string, data: string | Buffer) => {
    const path = join(dir, name);
    writeFileSync(path, data);
    return path;
  };
  const lines = (count: number) =>
    Array.from(
      { length: count },
      (_, i) => `${JSON.stringify({ id: `e-${i}`, pad: 'x'.repeat(40) })}\n`,
    ).join('');

  test('integers above 2^53 are distinct ids: 9007199254740993 and 9007199254740992 both written', async () => {
    const input = '{"id":9007199254740993}\n{"id":9007199254740992}\n{"id":9007199254740993.0}\n';
    const result = await runCli(['dedup', '--id', 'id', '--store', 'memory'], { input });
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '{"id":9007199254740993}\n{"id":9007199254740992}\n');
    assert.match(result.stderr, /duplicates 1/);
  });

  test("--store memory finds every repeat of the run, past the memory store's default cap of ids", async () => {
    // The memory store evicts its oldest ids past `maxEntries` (1M by default); the one-shot run must not.
    // A few batches past the cap, so id 0 would be gone before its repeat is looked up.
    const distinct = memoryDefaults.maxEntries + 5_000;
    const parts: string[] = [];
    for (let i = 0; i < distinct; i++) parts.push(`{"id":${i}}\n`);
    parts.push('{"id":0,"again":true}\n');
    const path = file('many.ndjson', parts.join(''));
    const devNull = openSync('/dev/null', 'w');
    try {
      const result = await runCli(['dedup', '--id', 'id', '--store', 'memory', '--no-progress', path], {
        stdoutFd: devNull,
      });
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stderr, new RegExp(`wrote ${distinct.toLocaleString('en-US')}, duplicates 1,`));
    } finally {
      closeSync(devNull);
    }
  });

  test('an id that is not valid UTF-8 is an invalid line named file:line, never merged with another', async () => {
    const path = file(
      'utf8.ndjson',
      Buffer.concat([
        Buffer.from('{"id":"user-'),
        Buffer.from([0xff]),
        Buffer.from('"}\n{"id":"user-'),
        Buffer.from([0xfe]),
        Buffer.from('"}\n{"id":"user-ok"}\n'),
      ]),
    );
    const stopped = await runCli(['dedup', '--id', 'id', '--store', freshStore(), path]);
    assert.equal(stopped.code, 1);
    assert.match(stopped.stderr, new RegExp(`${escapeRegex(path)}:1: id field "id" is not valid UTF-8`));
    const skipped = await runCli(['dedup', '--id', 'id', '--invalid', 'skip', '--store', freshStore(), path]);
    assert.equal(skipped.code, 0, skipped.stderr);
    assert.equal(skipped.stdout, '{"id":"user-ok"}\n');
    assert.match(
      skipped.stderr,
      new RegExp(`${escapeRegex(path)}:2: id field "id" is not valid UTF-8 \\(skipped\\)`),
    );
    assert.match(skipped.stderr, /invalid 2/);
  });

  test('a line longer than --max-line-bytes is an invalid line, skipped even under pass', async () => {
    const long = JSON.stringify({ id: 'long', pad: 'y'.repeat(3_000_000) });
    const path = file('long.ndjson', `{"id":"a"}\n${long}\n{"id":"b"}\n`);
    const stopped = await runCli([
      'dedup',
      '--id',
      'id',
      '--max-line-bytes',
      '1000000',
      '--store',
      freshStore(),
      path,
    ]);
    assert.equal(stopped.code, 1);
    assert.match(
      stopped.stderr,
      new RegExp(
        `${escapeRegex(path)}:2: line is ${long.length} bytes, longer than --max-line-bytes 1000000`,
      ),
    );
    assert.equal(stopped.stdout, '{"id":"a"}\n');
    const passed = await runCli([
      'dedup',
      '--id',
      'id',
      '--invalid',
      'pass',
      '--max-line-bytes',
      '1000000',
      '--store',
      freshStore(),
      path,
    ]);
    assert.equal(passed.code, 0, passed.stderr);
    assert.equal(passed.stdout, '{"id":"a"}\n{"id":"b"}\n');
    assert.match(passed.stderr, new RegExp(`${escapeRegex(path)}:2: line is .* \\(skipped\\)`));
    // The same line fits under the default maximum.
    const fits = await runCli(['dedup', '--id', 'id', '--store', 'memory', path]);
    assert.equal(fits.code, 0, fits.stderr);
    assert.equal(idsOf(fits.stdout).length, 3);
  });

  test('an over-long last line without a newline, on stdin, is named <stdin>:line', async () => {
    const input = `{"id":"a"}\n{"id":"${'z'.repeat(5_000)}"}`;
    const result = await runCli(
      ['dedup', '--id', 'id', '--invalid', 'skip', '--max-line-bytes', '100', '--store', 'memory'],
      { input },
    );
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '{"id":"a"}\n');
    assert.match(result.stderr, /<stdin>:2: line is 5009 bytes, longer than --max-line-bytes 100/);
  });

  test('--max-line-bytes and dedup.maxLineBytes are checked', async () => {
    const path = file('ok.ndjson', '{"id":1}\n');
    const bad = await runCli(['dedup', '--id', 'id', '--max-line-bytes', '0', '--store', 'memory', path]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--max-line-bytes/);
    const config = file('max.toml', '[dedup]\nmaxLineBytes = 5\ninvalid = "skip"\n');
    const fromConfig = await runCli(['dedup', '--config', config, '--id', 'id', '--store', 'memory', path]);
    assert.equal(fromConfig.code, 0, fromConfig.stderr);
    assert.equal(fromConfig.stdout, '');
    assert.match(fromConfig.stderr, /:1: line is 8 bytes, longer than --max-line-bytes 5/);
  });

  test('a UTF-8 byte-order mark at the start of a file is not part of line 1, nor copied', async () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const first = file('bom1.ndjson', Buffer.concat([bom, Buffer.from('{"id":"a"}\n{"id":"b"}\n')]));
    const second = file('bom2.ndjson', Buffer.concat([bom, Buffer.from('{"id":"a"}\n{"id":"c"}\n')]));
    const result = await runCli(['dedup', '--id', 'id', '--store', freshStore(), first, second]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '{"id":"a"}\n{"id":"b"}\n{"id":"c"}\n');
    const stdin = await runCli(['dedup', '--id', 'id', '--store', 'memory'], {
      input: '\uFEFF{"id":"x"}\n',
    });
    assert.equal(stdin.code, 0, stdin.stderr);
    assert.equal(stdin.stdout, '{"id":"x"}\n');
  });

  test('stdout on a full device (/dev/full): the run stops with a clear error and marks nothing', async () => {
    const path = file('full.ndjson', lines(3000));
    const store = freshStore();
    const fd = openSync('/dev/full', 'w');
    let failed: Awaited<ReturnType<typeof runCli>>;
    try {
      failed = await runCli(['dedup', '--id', 'id', '--store', store, path], { stdoutFd: fd });
    } finally {
      closeSync(fd);
    }
    assert.equal(failed.code, 3);
    assert.match(failed.stderr, /writing to stdout failed \(ENOSPC.*not marked/);
    const rerun = await runCli(['dedup', '--id', 'id', '--store', store, path]);
    assert.equal(rerun.code, 0, rerun.stderr);
    assert.equal(idsOf(rerun.stdout).length, 3000, 'nothing was marked');
  });

  test('a short write (file size limit reached mid-batch) stops the run and leaves that batch unmarked', async () => {
    const path = file('short.ndjson', lines(3000));
    const store = freshStore();
    const outPath = join(dir, 'short-out.ndjson');
    const fd = openSync(outPath, 'w');
    let code: number | null;
    let stderr: string;
    try {
      // bash's `ulimit -f` counts 1024-byte blocks: the file may grow to 50 KiB, so the second batch of 500
      // lines (~30 KiB each) is cut short: the kernel accepts part of the write, then refuses the rest (EFBIG).
      const child = startCli(['dedup', '--id', 'id', '--batch-size', '500', '--store', store, path], {
        shell: 'ulimit -f 50',
        stdoutFd: fd,
      });
      ({ code, stderr } = await finished(child));
    } finally {
      closeSync(fd);
    }
    assert.equal(code, 3, stderr);
    assert.match(stderr, /writing to stdout failed \(EFBIG.*not marked/);
    const written = readFileSync(outPath, 'utf8');
    const complete = written.slice(0, written.lastIndexOf('\n') + 1);
    const rerun = await runCli(['dedup', '--id', 'id', '--store', store, path]);
    assert.equal(rerun.code, 0, rerun.stderr);
    const seen = new Set([...idsOf(complete), ...idsOf(rerun.stdout)]);
    assert.equal(seen.size, 3000, 'every id is in the first output or the re-run: nothing marked was lost');
  });

  test("the README's first command succeeds on a fresh store and the summary names the store", async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const command = /npx idem (dedup [^#\n]*?)\s+#/.exec(readme)?.[1];
    assert.ok(command, 'the README starts with an idem dedup command');
    const cwd = join(dir, 'readme');
    mkdirSync(join(cwd, 'examples'), { recursive: true });
    for (const name of ['events.ndjson', 'messy.ndjson']) {
      copyFileSync(join(ROOT, 'examples', name), join(cwd, 'examples', name));
    }
    const first = await runCli(command.split(/\s+/), { cwd });
    assert.equal(first.code, 0, first.stderr);
    assert.match(
      first.stderr,
      /read 6 lines, wrote 4, duplicates 2, invalid 0.*store \.idem-store \(RocksDB\)/,
    );
    const again = await runCli(command.split(/\s+/), { cwd });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /wrote 0, duplicates 6/);
    const oneShot = await runCli([...command.split(/\s+/), '--store', 'memory'], { cwd });
    assert.match(oneShot.stderr, /wrote 4, duplicates 2, .*store in memory \(nothing kept after this run\)/);
    // Invalid lines are shown with their own example file.
    const messy = await runCli(
      ['dedup', '--id', 'id', '--invalid', 'skip', '--store', 'memory', 'examples/messy.ndjson'],
      { cwd },
    );
    assert.equal(messy.code, 0, messy.stderr);
    assert.match(messy.stderr, /examples\/messy.ndjson:2: no id at id \(skipped\)/);
    assert.match(messy.stderr, /examples\/messy.ndjson:3: invalid JSON/);
    assert.match(messy.stderr, /read 5 lines, wrote 2, duplicates 1, invalid 2/);
  });
});

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
