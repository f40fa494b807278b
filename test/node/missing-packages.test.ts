import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { MissingDependencyError } from '../../src/errors.js';
import { asMissingDependency, loadOptional, packageName } from '../../src/util/optional-module.js';
import { runSource, SOURCE_CLI, SOURCE_NODE_BIN } from '../helpers/source-run.js';
import { endpoints } from '../helpers/stores.js';

// The optional packages are really missing in the child: a resolve hook (test/helpers/hide-packages) makes
// Node's resolver fail for them with its own error, as on a machine where they were never installed.
const CLI = SOURCE_CLI;
const BIN = SOURCE_NODE_BIN;

const run = (script: string, args: readonly string[], hidden: readonly string[]) =>
  runSource(script, args, { hidden });

const NODE_TOML = `[kafka]
brokers = ["${endpoints.kafkaBrokers[0]}"]
[input]
topic = "in"
[output]
topic = "out"
[dlq]
topic = "dlq"
[dedup]
id = "uid"
`;

describe('a missing optional package names its install command', () => {
  let dir = '';
  const file = (name: string) => join(dir, name);
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'idem-missing-'));
    await writeFile(
      file('node-kafkajs.toml'),
      `${NODE_TOML.replace('[kafka]\n', '[kafka]\nclient = "kafkajs"\n')}[repository]\ntype = "memory"\n`,
    );
    await writeFile(file('in.ndjson'), '{"id":1}\n{"id":1}\n');
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  for (const [how, script, args] of [
    ['idem node', CLI, ['node', '--config']],
    ['src/node/bin.ts', BIN, ['--config']],
  ] as const) {
    it(`${how} on kafka.client = "kafkajs" without kafkajs: one line naming npm install kafkajs, exit 3, no stack`, async () => {
      const result = await run(script, [...args, file('node-kafkajs.toml')], ['kafkajs']);
      // The message names the command itself: printed once, not prefixed again ("idem node: idem node needs").
      assert.equal(
        result.stderr,
        'idem node with kafka.client = "kafkajs" needs the npm package "kafkajs", which is not installed: ' +
          'npm install kafkajs\n',
      );
      assert.equal(result.code, 3);
    });
  }

  it('idem dedup needs no kafkajs (nor any store client) with the memory store', async () => {
    const all = ['kafkajs', 'ioredis', 'cassandra-driver', '@aws-sdk/client-dynamodb'];
    const result = await run(CLI, ['dedup', '--id', 'id', '--store', 'memory', file('in.ndjson')], all);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stdout, '{"id":1}\n');
  });

  for (const [type, pkg, settings] of [
    ['redis', 'ioredis', `url = "${endpoints.redisUrl}"`],
    ['dynamodb', '@aws-sdk/client-dynamodb', `table = "ids"\nendpoint = "${endpoints.dynamodbEndpoint}"`],
    ['cassandra', 'cassandra-driver', `contactPoints = ["${endpoints.cassandraContactPoints[0]}"]`],
  ] as const) {
    it(`the ${type} store without ${pkg}: idem dedup and idem node say npm install ${pkg}`, async () => {
      const config = file(`${type}.toml`);
      await writeFile(config, `[repository]\ntype = "${type}"\n${settings}\n`);
      const dedup = await run(CLI, ['dedup', '--id', 'id', '--config', config, file('in.ndjson')], [pkg]);
      assert.equal(
        dedup.stderr,
        `idem dedup: ${config}:2: repository.type: the ${type} store needs the npm package "${pkg}", which is not installed: npm install ${pkg}\n`,
      );
      assert.equal(dedup.code, 2);
      const nodeConfig = file(`node-${type}.toml`);
      await writeFile(nodeConfig, `${NODE_TOML}[repository]\ntype = "${type}"\n${settings}\n`);
      const node = await run(CLI, ['node', '--config', nodeConfig], [pkg]);
      assert.equal(
        node.stderr,
        `idem node: ${nodeConfig}:12: repository.type: the ${type} store needs the npm package "${pkg}", which is not installed: npm install ${pkg}\n`,
      );
      assert.equal(node.code, 2);
    });
  }
});

describe('loadOptional', () => {
  it('rejects with a MissingDependencyError for a package that is not installed', async () => {
    const error = await loadOptional('idem-no-such-package-xyz', { feature: 'the xyz exporter' }).then(
      () => assert.fail('expected a rejection'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof MissingDependencyError, String(error));
    assert.equal(error.code, 'IDEM_ERR_MISSING_DEPENDENCY');
    assert.equal(error.packageName, 'idem-no-such-package-xyz');
    assert.equal(
      error.message,
      'the xyz exporter needs the npm package "idem-no-such-package-xyz", which is not installed: npm install idem-no-such-package-xyz',
    );
  });

  it('returns an installed package and leaves other failures as they are', async () => {
    const zod = await loadOptional<typeof import('zod')>('zod', { feature: 'x' });
    assert.equal(typeof zod.z.object, 'function');
    const ownFile = Object.assign(new Error("Cannot find module '/app/dist/x.js' imported from /app/y.js"), {
      code: 'ERR_MODULE_NOT_FOUND',
    });
    assert.equal(asMissingDependency(ownFile, { feature: 'x' }), undefined);
    assert.equal(asMissingDependency(new SyntaxError('bad'), { feature: 'x' }), undefined);
  });

  it('names the package of a deep or scoped specifier', () => {
    assert.equal(packageName('@nxtedition/rocksdb/binding'), '@nxtedition/rocksdb');
    assert.equal(packageName('kafkajs/src/x'), 'kafkajs');
    assert.equal(packageName('./local.js'), undefined);
    assert.equal(packageName('node:fs'), undefined);
    assert.equal(packageName('file:///a/b.js'), undefined);
  });
});
