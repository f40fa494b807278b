import assert from 'node:assert/strict';
import { closeSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { type CliOptions, type CliResult, finished, runCli, startCli } from './run-cli.js';

describe('idem dedup --duplicates (issue 20 §5: what was dropped is visible)', {
  skip: skipUnlessEnabled('rocksdb'),
}, () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-dups-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };
  const records = (path: string) =>
    readFileSync(path, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, string>);

  test("one line per dropped line: its file:line, and the first copy's, across batches and files", async () => {
    const store = join(dir, 'store-1');
    const one = file('one.ndjson', '{"id":"a"}\n{"id":"b"}\n{"id":"a"}\n{"id":"c"}\n');
    const two = file('two.ndjson', '{"id":"c"}\n{"id":"d"}\n{"id":"b"}\n');
    const log = join(dir, 'dups-1.ndjson');
    // Batches of 2 lines: "a" at one:3 meets its first copy in the previous batch (found in the store), "c" at
    // two:1 the one in the same batch; "b" at two:3 one from another file.
    const result = await runCli([
      'dedup',
      '--id',
      'id',
      '--store',
      store,
      '--batch-size',
      '2',
      '--duplicates',
      log,
      one,
      two,
    ]);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '{"id":"a"}\n{"id":"b"}\n{"id":"c"}\n{"id":"d"}\n');
    assert.deepEqual(records(log), [
      { id: 'a', at: `${one}:3`, first: `${one}:1` },
      { id: 'c', at: `${two}:1`, first: `${one}:4` },
      { id: 'b', at: `${two}:3`, first: `${one}:2` },
    ]);

    // A later run on the same store: the first copies were read by the earlier run, whose mark time the
    // store's record tells. The file is appended to.
    const three = file('three.ndjson', '{"id":"d"}\n{"id":"e"}\n{"id":"e"}\n');
    const again = await runCli(['dedup', '--id', 'id', '--store', store, '--duplicates', log, three]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stdout, '{"id":"e"}\n');
    const all = records(log);
    assert.equal(all.length, 5);
    const [earlier, inRun] = all.slice(3) as [Record<string, string>, Record<string, string>];
    assert.equal(earlier.id, 'd');
    assert.equal(earlier.at, `${three}:1`);
    assert.equal(earlier.first, 'earlier run');
    assert.equal(new Date(earlier.firstSeen as string).toISOString(), earlier.firstSeen);
    assert.deepEqual(inRun, { id: 'e', at: `${three}:3`, first: `${three}:2` });
  });

  test('a path that cannot be written: one line naming --duplicates and the path, exit 2, nothing read', async () => {
    const input = file('in.ndjson', '{"id":"a"}\n');
    const bad = join(dir, 'no-such-dir', 'dups.ndjson');
    const result = await runCli(['dedup', '--id', 'id', '--store', 'memory', '--duplicates', bad, input]);
    assert.equal(result.code, 2);
    assert.equal(result.stdout, '');
    assert.equal(
      result.stderr,
      `idem dedup: --duplicates: cannot open ${JSON.stringify(bad)} for writing (ENOENT)\n`,
    );
    const dash = await runCli(['dedup', '--id', 'id', '--store', 'memory', '--duplicates', '-', input]);
    assert.equal(dash.code, 2);
    assert.equal(dash.stdout, '');
    assert.equal(dash.stderr, 'idem dedup: --duplicates: must name a file: stdout carries the kept lines\n');
  });

  /**
   * Runs the CLI, killing it if it has not ended after `ms`: before the check, a log that is also the input
   * grew without end and the run never finished, which must fail the test, not hang it.
   */
  const runBounded = async (args: string[], options: CliOptions, ms = 30_000): Promise<CliResult> => {
    const child = startCli(args, options);
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    try {
      return await finished(child);
    } finally {
      clearTimeout(timer);
    }
  };
  const refused = (result: CliResult, what: RegExp) => {
    assert.equal(result.code, 2, result.stderr);
    assert.equal(result.signal, null);
    const lines = result.stderr.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, result.stderr);
    assert.match(lines[0] as string, /^idem dedup: --duplicates: /);
    assert.match(lines[0] as string, what);
  };
  const text = '{"id":"a"}\n{"id":"a"}\n{"id":"b"}\n';

  test('a log that is an input (however spelt) is refused, exit 2, the input untouched', async () => {
    const input = file('self.ndjson', text);
    for (const spelling of [
      input,
      join(dir, '.', 'self.ndjson'),
      join(dir, '..', basename(dir), 'self.ndjson'),
    ]) {
      const result = await runBounded(
        ['dedup', '--id', 'id', '--store', 'memory', '--duplicates', spelling, input],
        {},
      );
      refused(result, /is the input .*self\.ndjson.*read its own records back/);
      assert.equal(result.stdout, '');
      assert.equal(readFileSync(input, 'utf8'), text);
    }
  });

  test('a log that is stdin, when stdin is the input, is refused', async () => {
    const input = file('stdin.ndjson', text);
    const fd = openSync(input, 'r');
    try {
      const result = await runBounded(['dedup', '--id', 'id', '--store', 'memory', '--duplicates', input], {
        stdinFd: fd,
      });
      refused(result, /is stdin, which this run reads/);
    } finally {
      closeSync(fd);
    }
    assert.equal(readFileSync(input, 'utf8'), text);
  });

  test('a log that is stdout (/dev/stdout, or the file stdout goes to) is refused, nothing written', async () => {
    const input = file('kept-in.ndjson', text);
    const out = join(dir, 'kept-out.ndjson');
    for (const spelling of ['/dev/stdout', out]) {
      writeFileSync(out, '');
      const fd = openSync(out, 'a');
      let result: CliResult;
      try {
        result = await runBounded(
          ['dedup', '--id', 'id', '--store', 'memory', '--duplicates', spelling, input],
          {
            stdoutFd: fd,
          },
        );
      } finally {
        closeSync(fd);
      }
      refused(result, /is the run's stdout, which carries the kept lines/);
      assert.equal(readFileSync(out, 'utf8'), '');
    }
  });

  test('a log on /dev/null next to a stdout on /dev/null is fine: nothing can mix there', async () => {
    const input = file('null-in.ndjson', text);
    const fd = openSync('/dev/null', 'w');
    try {
      const result = await runBounded(
        ['dedup', '--id', 'id', '--store', 'memory', '--duplicates', '/dev/null', input],
        { stdoutFd: fd },
      );
      assert.equal(result.code, 0, result.stderr);
    } finally {
      closeSync(fd);
    }
  });
});
