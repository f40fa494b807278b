import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { DynamoDbRepository } from '../../src/repositories/dynamodb/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

// Which region the store signs with is read off the wire: a pass-through proxy in front of dynalite records the
// credential scope of each request's SigV4 Authorization header (`Credential=<key>/<date>/<region>/dynamodb/...`).

const TABLE = 'idem_region_test';
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
const REGION_VARIABLES = ['AWS_REGION', 'AWS_DEFAULT_REGION', 'AWS_PROFILE', 'AWS_CONFIG_FILE'] as const;

/** Starts a proxy to `target` on a free loopback port; `regions` collects the signed region of each request. */
async function signingProxy(target: string): Promise<{ server: Server; url: string; regions: string[] }> {
  const upstream = new URL(target);
  const regions: string[] = [];
  const server = createServer((req, res) => {
    const scope = /Credential=[^/]+\/\d{8}\/([^/]+)\/dynamodb\//.exec(req.headers.authorization ?? '');
    regions.push(scope?.[1] ?? '(unsigned)');
    const forward = request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: req.headers,
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', () => res.writeHead(502).end());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { server, url: `http://127.0.0.1:${port}`, regions };
}

describe('dynamodb region', { skip: skipUnlessEnabled('dynamodb') }, () => {
  let proxy: Awaited<ReturnType<typeof signingProxy>>;
  let dir = '';
  const saved = new Map<string, string | undefined>();

  before(async () => {
    proxy = await signingProxy(endpoints.dynamodbEndpoint);
    dir = await mkdtemp(join(tmpdir(), 'idem-region-'));
    // No profile region from this machine's ~/.aws: the chain sees only what each test sets.
    await writeFile(join(dir, 'config'), '');
    for (const name of REGION_VARIABLES) saved.set(name, process.env[name]);
    const table = await DynamoDbRepository.open({
      table: TABLE,
      endpoint: endpoints.dynamodbEndpoint,
      region: 'us-east-1',
      credentials,
      createTable: true,
    });
    await table.close();
  });
  beforeEach(() => {
    for (const name of REGION_VARIABLES) delete process.env[name];
    process.env.AWS_CONFIG_FILE = join(dir, 'config');
    proxy.regions.length = 0;
  });
  after(async () => {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    await new Promise((resolve) => proxy.server.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  async function regionsSigned(options: { region?: string; endpoint?: string } = {}): Promise<string[]> {
    const repository = await DynamoDbRepository.open({
      table: TABLE,
      endpoint: options.endpoint ?? proxy.url,
      credentials,
      ...(options.region === undefined ? {} : { region: options.region }),
    });
    try {
      await repository.add(`region-${Date.now()}`, { ttlMs: 60_000 });
    } finally {
      await repository.close();
    }
    return [...new Set(proxy.regions)];
  }

  it('with AWS_REGION set and no repository.region, signs with AWS_REGION', async () => {
    process.env.AWS_REGION = 'eu-west-3';
    assert.deepEqual(await regionsSigned(), ['eu-west-3']);
  });

  it('takes the region from the AWS profile too (the SDK chain)', async () => {
    await writeFile(join(dir, 'profiled'), '[profile idem]\nregion = ap-southeast-2\n');
    process.env.AWS_CONFIG_FILE = join(dir, 'profiled');
    process.env.AWS_PROFILE = 'idem';
    assert.deepEqual(await regionsSigned(), ['ap-southeast-2']);
  });

  it('repository.region wins over AWS_REGION', async () => {
    process.env.AWS_REGION = 'eu-west-3';
    assert.deepEqual(await regionsSigned({ region: 'sa-east-1' }), ['sa-east-1']);
  });

  it('a local endpoint with no region anywhere falls back to us-east-1 (the emulator needs one)', async () => {
    assert.deepEqual(await regionsSigned(), ['us-east-1']);
  });

  it('a remote endpoint with no region anywhere is a ConfigError naming repository.region, before any request', async () => {
    await assert.rejects(
      DynamoDbRepository.open({ table: TABLE, endpoint: 'http://192.0.2.1:4567', credentials }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, 'repository.region');
        assert.equal(
          error.message,
          'repository.region: no AWS region: set repository.region, or AWS_REGION, or a region in the AWS profile',
        );
        return true;
      },
    );
  });
});
