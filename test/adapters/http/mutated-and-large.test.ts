/**
 * The HTTP adapter where peers' users were burned (issue #36): a route that changes the request body it was
 * given, and a response too large for the store. The key's fingerprint is the request as it came in, so a retry
 * of that request replays however the route changed `req.body`; a response one byte over the store's
 * `maxResultBytes` is sent whole, once, and the key then answers 409 `response-not-kept` (never a truncated
 * replay, never a second run).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it, type TestContext } from 'node:test';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import express from 'express';
import Fastify from 'fastify';
import { encodeResponse } from '../../../src/adapters/http/codec.js';
import { fastifyIdempotencyKey, idempotencyKey } from '../../../src/adapters/http/index.js';
import { repositoryModule as dynamodb } from '../../../src/repositories/dynamodb/index.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import type { IdempotentRepository } from '../../../src/store/types.js';
import { endpoints, skipUnlessEnabled } from '../../helpers/stores.js';

const table = `idem-http-limits-${randomUUID().slice(0, 8)}`;
const dynamodbConnection = {
  table,
  endpoint: endpoints.dynamodbEndpoint,
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
};

/** Each test opens its own repository (its own key prefix on DynamoDB), closed after it. */
const stores: Record<string, { skip: false | string; open: () => Promise<IdempotentRepository> }> = {
  memory: { skip: false, open: async () => new MemoryRepository() },
  dynamodb: {
    skip: skipUnlessEnabled('dynamodb'),
    open: () =>
      dynamodb.create(dynamodb.optionsSchema.parse({ ...dynamodbConnection, keyPrefix: `${randomUUID()}:` })),
  },
};

if (!stores.dynamodb?.skip) {
  before(async () => {
    const repo = await dynamodb.create(
      dynamodb.optionsSchema.parse({ ...dynamodbConnection, createTable: true }),
    );
    await repo.close();
  });
  after(async () => {
    const client = new DynamoDBClient({ region: 'us-east-1', ...dynamodbConnection });
    await client.send(new DeleteTableCommand({ TableName: table })).catch(() => {});
    client.destroy();
  });
}

const LARGE_TYPE = 'application/octet-stream';

/**
 * The body length and `content-location` padding that make the adapter keep exactly `bytes` UTF-8 bytes for a
 * 201 response of `/large`: the consumer's one-character tag, then the stored response's JSON, whose body is
 * base64 (4 characters per 3 bytes); the padding (1 to 4 characters) takes up the rest.
 */
function largeResponseKeptAs(bytes: number): { bodyBytes: number; pad: string } {
  const overhead = (pad: string) =>
    1 +
    Buffer.byteLength(
      encodeResponse({
        status: 201,
        headers: { 'content-location': pad, 'content-type': LARGE_TYPE },
        body: Buffer.alloc(0),
      }),
    );
  const bare = overhead('');
  const padLength = (bytes - bare) % 4 || 4;
  const pad = 'p'.repeat(padLength);
  const bodyBytes = (3 * (bytes - overhead(pad))) / 4;
  assert.ok(Number.isInteger(bodyBytes) && bodyBytes > 0);
  return { bodyBytes, pad };
}

/** The body `/large` sends: every byte value over and over, from a seed, so a cut or a mix-up would show. */
function largeBody(bytes: number, seed: number): Buffer {
  return Buffer.from(Array.from({ length: bytes }, (_, i) => (i + seed) % 256));
}

interface App {
  readonly url: string;
  readonly effects: { mutate: number; large: number };
}

/**
 * Two routes behind the adapter, on either framework:
 * - `POST /mutate`: changes `req.body` (its id field rewritten, a field deleted, another changed), then answers
 *   201 with what the body said when it arrived;
 * - `POST /large`: answers 201 with a binary body of `x-body-bytes` bytes and `content-location: <x-pad>`.
 */
async function startApp(
  t: TestContext,
  framework: 'express' | 'fastify',
  repository: IdempotentRepository,
): Promise<App> {
  const effects = { mutate: 0, large: 0 };
  const mutate = (parsed: unknown) => {
    const body = parsed as { id?: string; amount?: number; note?: string };
    effects.mutate++;
    const received = { ...body };
    body.id = 'rewritten';
    body.amount = -1;
    delete body.note;
    return { n: effects.mutate, received };
  };
  const large = (headers: Record<string, unknown>) => {
    effects.large++;
    return {
      pad: String(headers['x-pad']),
      body: largeBody(Number(headers['x-body-bytes']), Number(headers['x-seed'])),
    };
  };
  const options = { repository, scope: () => 'tester' };
  if (framework === 'express') {
    const app = express();
    const guard = idempotencyKey(options);
    app.use(express.json());
    app.post('/mutate', guard, (req, res) => {
      res.status(201).json(mutate(req.body));
    });
    app.post('/large', guard, (req, res) => {
      const { pad, body } = large(req.headers);
      res.status(201).set('content-location', pad).type(LARGE_TYPE).send(body);
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    t.after(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, effects };
  }
  const app = Fastify({ forceCloseConnections: true });
  const guard = fastifyIdempotencyKey(options);
  app.post('/mutate', { preHandler: guard }, async (req, reply) => {
    reply.code(201);
    return mutate(req.body);
  });
  app.post('/large', { preHandler: guard }, async (req, reply) => {
    const { pad, body } = large(req.headers);
    reply.code(201).header('content-location', pad).type(LARGE_TYPE);
    return body;
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  t.after(() => app.close());
  return { url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`, effects };
}

interface Reply {
  readonly status: number;
  readonly headers: Headers;
  readonly bytes: Buffer;
}

async function post(url: string, key: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key, ...headers },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    headers: response.headers,
    bytes: Buffer.from(await response.arrayBuffer()),
  } satisfies Reply;
}

const replayed = (r: Reply) => r.headers.get('idempotent-replayed') === 'true';

function assertProblem(r: Reply, status: number, kind: string): void {
  assert.equal(r.status, status, r.bytes.toString().slice(0, 500));
  const body = JSON.parse(r.bytes.toString()) as { type?: string };
  assert.equal(body.type, `tag:idempotent-consumer,2026:http:${kind}`);
}

for (const [storeName, store] of Object.entries(stores)) {
  describe(`HTTP Idempotency-Key on ${storeName}: mutated bodies and large responses`, {
    skip: store.skip,
  }, () => {
    for (const framework of ['express', 'fastify'] as const) {
      describe(framework, () => {
        async function setup(t: TestContext) {
          const repository = await store.open();
          t.after(async () => {
            await repository.clear().catch(() => undefined);
            await repository.close().catch(() => undefined);
          });
          return { repository, app: await startApp(t, framework, repository) };
        }

        it('a route that changes req.body is deduplicated on the body the request came with', async (t) => {
          const { app } = await setup(t);
          const key = randomUUID();
          const sent = { id: 'order-1', amount: 5, note: 'as sent' };
          const first = await post(`${app.url}/mutate`, key, sent);
          assert.equal(first.status, 201);
          assert.deepEqual(JSON.parse(first.bytes.toString()).received, sent);
          const retry = await post(`${app.url}/mutate`, key, sent);
          assert.equal(retry.status, 201);
          assert.ok(replayed(retry), 'the retry of the request as sent was not replayed');
          assert.ok(retry.bytes.equals(first.bytes));
          // What the route turned the body into is another request under this key.
          assertProblem(
            await post(`${app.url}/mutate`, key, { id: 'rewritten', amount: -1 }),
            422,
            'key-reused',
          );
          assert.equal(app.effects.mutate, 1);
        });

        it("a response of exactly the store's limit is replayed whole; one byte over is sent once, then 409", async (t) => {
          const { app, repository } = await setup(t);
          const limit = repository.capabilities.maxResultBytes;
          for (const [kept, bytes] of [
            [true, limit],
            [false, limit + 1],
          ] as const) {
            const { bodyBytes, pad } = largeResponseKeptAs(bytes);
            const seed = bytes % 256;
            const expected = largeBody(bodyBytes, seed);
            const headers = { 'x-body-bytes': String(bodyBytes), 'x-pad': pad, 'x-seed': String(seed) };
            const key = randomUUID();
            const effectsBefore = app.effects.large;
            const first = await post(`${app.url}/large`, key, { kept }, headers);
            assert.equal(first.status, 201);
            assert.equal(replayed(first), false);
            assert.ok(first.bytes.equals(expected), `${bytes}: the first response was not sent whole`);
            assert.equal(first.headers.get('content-type'), LARGE_TYPE);
            const retry = await post(`${app.url}/large`, key, { kept }, headers);
            if (kept) {
              assert.equal(retry.status, 201, `a response kept as ${bytes} bytes was not replayed`);
              assert.ok(replayed(retry));
              assert.ok(retry.bytes.equals(expected), `${bytes}: the replay is not the response`);
            } else {
              assertProblem(retry, 409, 'response-not-kept');
            }
            assert.equal(app.effects.large, effectsBefore + 1, `${bytes}: the route ran again`);
          }
        });
      });
    }
  });
}
