import assert from 'node:assert/strict';
import { closeSync, openSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { type CliResult, finished, idsOf, ndjson, ROOT, runCli, startCli } from './run-cli.js';

const skip = skipUnlessEnabled('rocksdb');

// Every test owns its input files and its store (freshStore), so they run side by side: most of a test's time is
// a CLI process starting and syncing its store.
describe('idem dedup', { skip, concurrency: 4 }, () => {
  let dir = '';
  let stores = 0;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-cli-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  /** A fresh RocksDB directory for one test. */
  const freshStore = () => join(dir, `store-${++stores}`);
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  test('writes first-seen lines byte for byte, in input order', async () => {
    const input = [
      '{"id":"a","text":"café ☕"}',
      '{ "id" : "b" ,  "spaced": true }  ',
      '{"id":"a","text":"again"}',
      '{"id":"c"}\r',
      '{"id":7}',
      '{"id":"7","note":"a number id and its string are the same id"}',
      '{"text":"late","id":"b"}',
      '{"id":"d"}',
    ];
    const path = file('bytes.ndjson', `${input.join('\n')}\n`);
    const result = await runCli(['dedup', '--id', 'id', '--store', freshStore(), path]);
    assert.equal(result.code, 0, result.stderr);
    const kept = [input[0], input[1], input[3], input[4], input[7]];
    assert.equal(result.stdout, `${kept.join('\n')}\n`);
    assert.match(result.stderr, /read 8 lines, wrote 5, duplicates 3, invalid 0/);
  });

  test('reads stdin when there is no file or the file is "-"', async () => {
    const input = '{"id":1}\n{"id":2}\n{"id":1}\n{"id":3}';
    for (const args of [[], ['-']]) {
      const result = await runCli(['dedup', '--id', 'id', '--store', freshStore(), ...args], { input });
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, '{"id":1}\n{"id":2}\n{"id":3}\n');
    }
  });

  test('duplicates across files and across runs on the same store', async () => {
    const store = freshStore();
    const one = file('one.ndjson', '{"id":"x"}\n{"id":"y"}\n');
    const two = file('two.ndjson', '{"id":"y","v":2}\n{"id":"z"}\n{"id":"x","v":2}\n');
    const first = await runCli(['dedup', '--id', 'id', '--store', store, one, two]);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(idsOf(first.stdout), ['x', 'y', 'z']);

    const three = file('three.ndjson', '{"id":"z"}\n{"id":"w"}\n');
    const second = await runCli(['dedup', '--id', 'id', '--store', store, two, three]);
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(idsOf(second.stdout), ['w']);
    assert.match(second.stderr, /read 5 lines, wrote 1, duplicates 4/);
  });

  test('a composite --id uses every path; a missing part is an invalid line', async () => {
    const path = file(
      'composite.ndjson',
      [
        '{"user":{"id":1},"event":"login"}',
        '{"user":{"id":1},"event":"logout"}',
        '{"user":{"id":1},"event":"login","again":true}',
        '{"user":{"id":2},"event":"login"}',
        '{"user":{},"event":"login"}',
      ].join('\n'),
    );
    const result = await runCli([
      'dedup',
      '--id',
      'user.id,event',
      '--invalid',
      'skip',
      '--store',
      freshStore(),
      path,
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout.trim().split('\n').length, 3);
    assert.match(result.stderr, new RegExp(`${escapeRegex(path)}:5: no id at user\\.id`));
  });

  describe('--invalid', () => {
    const input = [
      '{"id":1}',
      'not json',
      '{"id":1}',
      '{"other":2}',
      '',
      '{"id":{"nested":true}}',
      '{"id":3}',
    ];
    let path = '';
    before(() => {
      path = file('invalid.ndjson', `${input.join('\n')}\n`);
    });

    test('error (default): stops at the first bad line with file:line and a non-zero exit', async () => {
      const result = await runCli(['dedup', '--id', 'id', '--store', freshStore(), path]);
      assert.equal(result.code, 1);
      assert.match(result.stderr, new RegExp(`${escapeRegex(path)}:2: invalid JSON`));
      assert.equal(result.stdout, '{"id":1}\n', 'lines before the bad one are written');
    });

    test('pass: writes bad lines through and reports each with file:line', async () => {
      const result = await runCli([
        'dedup',
        '--id',
        'id',
        '--invalid',
        'pass',
        '--store',
        freshStore(),
        path,
      ]);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(
        result.stdout,
        ['{"id":1}', 'not json', '{"other":2}', '', '{"id":{"nested":true}}', '{"id":3}', ''].join('\n'),
      );
      assert.match(result.stderr, new RegExp(`${escapeRegex(path)}:2: invalid JSON.*passed through`));
      assert.match(result.stderr, new RegExp(`${escapeRegex(path)}:4: no id at id.*passed through`));
      assert.match(result.stderr, new RegExp(`${escapeRegex(path)}:5: empty line.*passed through`));
      assert.match(
        result.stderr,
        new RegExp(`${escapeRegex(path)}:6: id field "id" must be a string or a number`),
      );
      assert.match(result.stderr, /invalid 4/);
    });

    test('skip: drops bad lines, reports each with file:line and counts them', async () => {
      const result = await runCli([
        'dedup',
        '--id',
        'id',
        '--invalid',
        'skip',
        '--store',
        freshStore(),
        path,
      ]);
      assert.equal(result.code, 0, result.stderr);
      assert.equal(result.stdout, '{"id":1}\n{"id":3}\n');
      for (const line of [2, 4, 5, 6]) {
        assert.match(result.stderr, new RegExp(`${escapeRegex(path)}:${line}: .*skipped`));
      }
      assert.match(result.stderr, /read 7 lines, wrote 2, duplicates 1, invalid 4/);
    });
  });

  test('usage and config errors exit 2 with a message', async () => {
    const input = file('ok.ndjson', '{"id":1}\n');
    const cases: { args: string[]; stderr: RegExp }[] = [
      { args: [input], stderr: /consumer\.id: required/ },
      {
        args: ['--id', 'id', '--ttl', 'forever', input],
        stderr: /--ttl: consumer\.ttl: must be a duration like "5s" or a number of ms, got "forever"/,
      },
      {
        // Past every store's maximum: refused up front, so a rerun cannot write the line again.
        args: ['--id', 'id', '--store', freshStore(), '--ttl', '99999999999999d', input],
        stderr: /--ttl: consumer\.ttl: must be at most 3153600000000 ms \(36500 days\)/,
      },
      { args: ['--id', 'id', '--invalid', 'maybe', input], stderr: /--invalid/ },
      { args: ['--id', 'id', '--bogus', input], stderr: /unknown option/ },
      { args: ['--id', 'id', join(dir, 'missing.ndjson')], stderr: /missing\.ndjson \(ENOENT\)/ },
      { args: ['--id', 'a..b', input], stderr: /bad --id/ },
      {
        args: ['--id', 'id', '--config', file('broken.toml', '[dedup]\ninvalid = \n'), input],
        stderr: /broken\.toml:2:\d+: /,
      },
      {
        args: [
          '--id',
          'id',
          '--config',
          file('typo.toml', '[dedup]\ninvalid = "pass"\nbatchsize = 10\n'),
          input,
        ],
        stderr: /typo\.toml:3: dedup\.batchsize: unknown key/,
      },
    ];
    // Independent runs (each its own store): side by side.
    const results = await Promise.all(
      cases.map(({ args }) => runCli(['dedup', '--store', freshStore(), ...args])),
    );
    for (const [i, { args, stderr }] of cases.entries()) {
      const result = results[i] as CliResult;
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, stderr);
      assert.equal(result.stdout, '');
    }
  });

  test('a config file supplies the id and policies; flags win over it', async () => {
    const input = file('cfg.ndjson', '{"key":"a"}\nbad\n{"key":"a"}\n');
    const config = file('idem.toml', '[consumer]\nid = "key"\nttl = "7d"\n[dedup]\ninvalid = "skip"\n');
    const fromFile = await runCli(['dedup', '--config', config, '--store', freshStore(), input]);
    assert.equal(fromFile.code, 0, fromFile.stderr);
    assert.equal(fromFile.stdout, '{"key":"a"}\n');
    const flagged = await runCli([
      'dedup',
      '--config',
      config,
      '--invalid',
      'error',
      '--store',
      freshStore(),
      input,
    ]);
    assert.equal(flagged.code, 1);
    const viaEnv = await runCli(['dedup', '--store', freshStore(), input], {
      env: { IDEM_CONFIG: config, IDEM__DEDUP__INVALID: 'pass' },
    });
    assert.equal(viaEnv.stdout, '{"key":"a"}\nbad\n');
  });

  test('a reader that goes away (| head) ends the run quietly', async () => {
    const { text } = ndjson(50_000, 0.1, 3);
    const path = file('epipe.ndjson', text);
    const child = startCli(['dedup', '--id', 'id', '--batch-size', '100', '--store', freshStore(), path]);
    const done = finished(child);
    child.stdout?.once('data', () => child.stdout?.destroy());
    const result = await done;
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stderr, /output closed by its reader/);
    assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
  });

  test('SIGTERM finishes the current batch, exits 143, and a re-run completes without repeats', async () => {
    const { text, distinct } = ndjson(20_000, 0.1, 4);
    const lines = text.split('\n');
    const store = freshStore();
    const out = join(dir, 'sigterm.out');
    const args = ['dedup', '--id', 'id', '--batch-size', '500', '--store', store];

    // Feed part of the input on stdin, wait for output, then signal while the CLI waits for more input.
    const fd = openSync(out, 'w');
    const child = startCli(args, { stdoutFd: fd, keepStdinOpen: true });
    const done = finished(child);
    // The CLI closes its stdin when signalled; the test's side of the pipe may then see EPIPE.
    child.stdin?.on('error', () => {});
    await new Promise<void>((resolve) =>
      child.stdin?.write(`${lines.slice(0, 10_250).join('\n')}\n`, () => resolve()),
    );
    // Wait until every full batch is written (the first-seen lines of the first 10,000, byte for byte), then until
    // the output stops growing: the last 250 lines wait for more input.
    const seen = new Set<string>();
    let fullBatches = 0;
    for (const line of lines.slice(0, 10_000)) {
      const [id] = idsOf(line);
      if (id !== undefined && !seen.has(id)) {
        seen.add(id);
        fullBatches += Buffer.byteLength(line) + 1;
      }
    }
    const deadline = Date.now() + 120_000;
    while (statSync(out).size < fullBatches) {
      assert.ok(
        Date.now() < deadline,
        `the first 20 batches (${fullBatches} bytes) were not written in 120 s`,
      );
      await sleep(50);
    }
    let size = -1;
    while (size === -1 || statSync(out).size !== size) {
      size = statSync(out).size;
      await sleep(300);
    }
    child.kill('SIGTERM');
    const stopped = await done;
    closeSync(fd);
    assert.equal(stopped.code, 143, stopped.stderr);
    assert.match(stopped.stderr, /stopped by SIGTERM/);
    assert.match(stopped.stderr, /read 10,250 lines/, 'the partial last batch was finished too');

    const fd2 = openSync(out, 'a');
    const rerun = await runCli([...args, file('sigterm.ndjson', text)], { stdoutFd: fd2 });
    closeSync(fd2);
    assert.equal(rerun.code, 0, rerun.stderr);
    const ids = idsOf(readFileSync(out, 'utf8'));
    assert.equal(new Set(ids).size, distinct, 'every distinct id appears');
    assert.equal(ids.length, distinct, 'no id appears twice after a graceful stop');
  });

  test('resumes after SIGKILL: every id appears, at most one batch repeats', async () => {
    const batchSize = 1000;
    const { text, distinct } = ndjson(200_000, 0.1, 5);
    const input = file('kill.ndjson', text);
    const out = join(dir, 'kill.out');
    const store = freshStore();
    const args = ['dedup', '--id', 'id', '--batch-size', String(batchSize), '--store', store, input];

    const fd = openSync(out, 'w');
    const child = startCli(args, { stdoutFd: fd });
    const done = finished(child);
    while (statSync(out).size < 200_000) await sleep(2);
    child.kill('SIGKILL');
    const killed = await done;
    closeSync(fd);
    assert.equal(killed.signal, 'SIGKILL', 'killed mid-run');

    // A kill can cut the last write short; the re-run appends after the last whole line.
    const firstText = readFileSync(out, 'utf8');
    truncateSync(out, Buffer.byteLength(firstText.slice(0, firstText.lastIndexOf('\n') + 1)));
    const first = idsOf(readFileSync(out, 'utf8'));
    assert.equal(new Set(first).size, first.length, 'no repeats within the killed run');
    assert.ok(first.length < distinct, 'the kill came before the end');

    const fd2 = openSync(out, 'a');
    const rerun = await runCli(args, { stdoutFd: fd2 });
    closeSync(fd2);
    assert.equal(rerun.code, 0, rerun.stderr);

    const all = idsOf(readFileSync(out, 'utf8'));
    const second = all.slice(first.length);
    assert.equal(new Set(second).size, second.length, 'no repeats within the re-run');
    assert.equal(new Set(all).size, distinct, 'every distinct id appears in the combined output');
    const firstSet = new Set(first);
    const repeated = second.filter((id) => firstSet.has(id));
    assert.ok(
      repeated.length <= batchSize,
      `${repeated.length} ids repeated, bound is one batch (${batchSize})`,
    );
    // Only the killed run's last batch (written, not yet marked) may repeat.
    const lastBatch = new Set(first.slice(-batchSize));
    assert.ok(
      repeated.every((id) => lastBatch.has(id)),
      'only ids of the last written batch repeat',
    );
  });

  test('bin/idem.js runs the CLI', async () => {
    const result = await runCli(['--version'], { main: join(ROOT, 'bin/idem.js') });
    assert.equal(result.code, 0, result.stderr);
    assert.match(result.stdout, /^\d+\.\d+\.\d+/);
  });
});

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
