import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { runCli } from './run-cli.js';

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
});
