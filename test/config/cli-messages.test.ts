import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runSource, SOURCE_CLI } from '../helpers/source-run.js';

// The config errors of issue 12 as a person sees them: the whole stderr of `idem dedup` / `idem node`, exit 2.
// (The same messages at the loadConfig level: test/config/errors.test.ts; --batch-size abc: cli-config.test.ts.)

const idem = (args: readonly string[], env: Record<string, string> = {}) =>
  runSource(SOURCE_CLI, args, { env });

const NODE = `[kafka]
brokers = ["127.0.0.1:9092"]
[input]
topic = "in"
[output]
topic = "out"
[dlq]
topic = "dlq"
[dedup]
id = "uid"
[repository]
type = "rocksdb"
`;

describe('config errors as idem prints them', () => {
  let dir = '';
  const file = (name: string) => join(dir, name);
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-cli-messages-'));
    await writeFile(file('node.toml'), NODE);
    await writeFile(file('ttl.toml'), '[consumer]\nttl = true\n');
    await writeFile(file('ok.toml'), '[consumer]\nttl = "1h"\n');
    await writeFile(file('in.ndjson'), '{"id":1}\n');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('idem node: a store without its path "is required", at the [repository] table', async () => {
    const { code, stderr } = await idem(['node', '--config', file('node.toml')]);
    assert.equal(stderr, `idem node: ${file('node.toml')}:11: repository.path: is required\n`);
    assert.equal(code, 2);
  });

  it('idem dedup: ttl = true says what a duration looks like', async () => {
    const { code, stderr } = await idem([
      'dedup',
      '--id',
      'id',
      '--config',
      file('ttl.toml'),
      file('in.ndjson'),
    ]);
    assert.equal(
      stderr,
      `idem dedup: ${file('ttl.toml')}:2: consumer.ttl: must be a duration like "5s" or a number of ms, got true\n`,
    );
    assert.equal(code, 2);
  });

  it('IDEM__CONSUMR__TTL=5s is reported against the variable, not the file (idem dedup and idem node)', async () => {
    const env = { IDEM__CONSUMR__TTL: '5s' };
    const dedup = await idem(['dedup', '--id', 'id', '--config', file('ok.toml'), file('in.ndjson')], env);
    assert.equal(
      dedup.stderr,
      'idem dedup: env IDEM__CONSUMR__TTL: consumr: unknown key (did you mean consumer?); valid keys here: repository, consumer, dedup\n',
    );
    assert.equal(dedup.code, 2);
    const node = await idem(['node', '--config', file('node.toml')], env);
    assert.equal(
      node.stderr,
      'idem node: env IDEM__CONSUMR__TTL: consumr: unknown key; valid keys here: repository, kafka, input, output, changelog, dlq, dedup, metrics, perf, shutdown, catchUp\n',
    );
    assert.equal(node.code, 2);
  });
});
