import assert from 'node:assert/strict';
import { statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { estimateLines } from '../../src/cli/estimate.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { runCli } from './run-cli.js';

const skip = skipUnlessEnabled('rocksdb');

describe('estimateLines', () => {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-cli-estimate-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const file = (name: string, data: string) => {
    const path = join(dir, name);
    writeFileSync(path, data);
    return { name: path, bytes: statSync(path).size };
  };

  test('counts a small file exactly, a last line without newline included', async () => {
    assert.equal(await estimateLines([file('small.ndjson', '{"id":1}\n{"id":2}\n{"id":3}')]), 3);
    assert.equal(await estimateLines([file('empty.ndjson', '')]), 0);
  });

  test('extrapolates a large file from its first lines, and adds up several files', async () => {
    const line = `${JSON.stringify({ id: 'x', pad: 'p'.repeat(90) })}\n`; // 108 bytes
    const big = file('big.ndjson', line.repeat(20_000)); // 2.1 MB, past the sample
    const estimate = (await estimateLines([big])) as number;
    assert.ok(Math.abs(estimate - 20_000) <= 20, `estimate ${estimate}`);
    const both = (await estimateLines([big, file('two.ndjson', line.repeat(2))])) as number;
    assert.ok(Math.abs(both - 20_002) <= 20, `estimate ${both}`);
  });

  test('stdin alone gives no estimate; with files, only the files count', async () => {
    assert.equal(await estimateLines([{ name: '-', bytes: 0 }]), undefined);
    assert.equal(await estimateLines([{ name: '-', bytes: 0 }, file('one.ndjson', '{"id":1}\n')]), 1);
  });
});

/**
 * The key index snapshot (`index.bin`, written on close) holds the index's tables whole, so its size shows the
 * size the index was given: presized for the run, or grown only as far as the distinct ids needed.
 */
// Each test owns its files and stores: side by side.
describe('idem dedup presizes the RocksDB key index for the run', { skip, concurrency: 4 }, () => {
  let dir = '';
  let stores = 0;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-cli-expected-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  const freshStore = () => join(dir, `store-${++stores}`);
  const indexBytes = (store: string) => statSync(join(store, 'index.bin')).size;
  const file = (name: string, data: string) => {
    const path = join(dir, name);
    writeFileSync(path, data);
    return path;
  };
  // 100,000 lines of one id: growing as ids arrive, the index would stay at its smallest.
  const repeats = () => file('repeats.ndjson', '{"id":"same"}\n'.repeat(100_000));

  test('estimated from the input files: sized for every line, not grown id by id', async () => {
    const path = repeats();
    const estimated = freshStore();
    const run = await runCli(['dedup', '--id', 'id', '--no-progress', '--store', estimated, path]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, '{"id":"same"}\n');
    const unsized = freshStore();
    const zero = await runCli(['dedup', '--id', 'id', '--expected-ids', '0', '--store', unsized, path]);
    assert.equal(zero.code, 0, zero.stderr);
    // 100,000 ids need tables of 8,192 slots × 16 × 8 bytes = 1 MiB; the smallest index is a few KiB.
    assert.ok(indexBytes(estimated) >= 1 << 20, `presized index.bin is ${indexBytes(estimated)} bytes`);
    assert.ok(indexBytes(unsized) < 1 << 17, `unsized index.bin is ${indexBytes(unsized)} bytes`);
  });

  test('--expected-ids wins over the config, which wins over the estimate', async () => {
    const input = file('three.ndjson', '{"id":1}\n{"id":2}\n{"id":3}\n');
    const config = file('expected.toml', '[repository]\ntype = "rocksdb"\nexpectedIds = 200000\n');
    const fromConfig = freshStore();
    const run = await runCli(['dedup', '--config', config, '--id', 'id', '--store', fromConfig, input]);
    assert.equal(run.code, 0, run.stderr);
    assert.ok(indexBytes(fromConfig) >= 2 << 20, `index.bin is ${indexBytes(fromConfig)} bytes`);
    const fromFlag = freshStore();
    const flagged = await runCli([
      'dedup',
      '--config',
      config,
      '--id',
      'id',
      '--expected-ids',
      '10',
      '--store',
      fromFlag,
      input,
    ]);
    assert.equal(flagged.code, 0, flagged.stderr);
    assert.ok(indexBytes(fromFlag) < 1 << 17, `index.bin is ${indexBytes(fromFlag)} bytes`);
  });

  test('a bad --expected-ids, or one without the RocksDB store, is a usage error naming the flag', async () => {
    const input = file('one.ndjson', '{"id":1}\n');
    for (const value of ['many', '-5', '1.5', '']) {
      const bad = await runCli([
        'dedup',
        '--id',
        'id',
        '--expected-ids',
        value,
        '--store',
        freshStore(),
        input,
      ]);
      assert.equal(bad.code, 2, `${value}: ${bad.stderr}`);
      assert.match(bad.stderr, /--expected-ids: repository\.expectedIds: must be a whole number of ids, got/);
    }
    const memory = await runCli(['dedup', '--id', 'id', '--expected-ids', '5', '--store', 'memory', input]);
    assert.equal(memory.code, 2);
    assert.match(
      memory.stderr,
      /--expected-ids: sizes the RocksDB store's key index, but this run uses the memory store/,
    );
  });

  test('stdin: --expected-ids presizes, and without it the index grows as before', async () => {
    const input = '{"id":"a"}\n{"id":"b"}\n';
    const sized = freshStore();
    const run = await runCli(['dedup', '--id', 'id', '--expected-ids', '100000', '--store', sized], {
      input,
    });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, input);
    assert.ok(indexBytes(sized) >= 1 << 20, `index.bin is ${indexBytes(sized)} bytes`);
    const unsized = freshStore();
    const plain = await runCli(['dedup', '--id', 'id', '--store', unsized], { input });
    assert.equal(plain.code, 0, plain.stderr);
    assert.ok(indexBytes(unsized) < 1 << 17, `index.bin is ${indexBytes(unsized)} bytes`);
  });
});
