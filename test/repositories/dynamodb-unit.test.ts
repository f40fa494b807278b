/**
 * DynamoDB repository paths that dynalite cannot show: config validation, the real-DynamoDB ALL_OLD answer,
 * unprocessed batch items and throttling. A scripted client (or a tiny scripted HTTP endpoint, for the SDK's own
 * retry strategy) stands in for the server, so these run without any store.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { describe, it, type TestContext } from 'node:test';
import {
  type AttributeValue,
  ConditionalCheckFailedException,
  type DynamoDBClient,
} from '@aws-sdk/client-dynamodb';
import { ConfigError, RepositoryError } from '../../src/errors.js';
import { DynamoDbRepository, type DynamoDbRepositoryOptions } from '../../src/repositories/dynamodb/index.js';

type Input = Record<string, unknown> & {
  Item?: Record<string, AttributeValue>;
  RequestItems?: Record<string, { Keys?: Record<string, AttributeValue>[] } | unknown[]>;
};
type Script = (operation: string, input: Input) => unknown;

const TABLE = {
  TableStatus: 'ACTIVE',
  KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
  AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
};

/** The batch request of the scripted table. */
const requested = <T>(input: Input): T => input.RequestItems?.scripted as T;

/** A client whose `send` follows a script and records every call by operation name. */
function scriptedClient(script: Script) {
  const calls: { operation: string; input: Input }[] = [];
  let destroyed = false;
  const client = {
    send: async (command: { constructor: { name: string }; input: Input }) => {
      const operation = command.constructor.name.replace(/Command$/, '');
      calls.push({ operation, input: command.input });
      if (operation === 'DescribeTable') return { Table: TABLE };
      return script(operation, command.input);
    },
    destroy: () => {
      destroyed = true;
    },
  };
  return {
    client: client as unknown as DynamoDBClient,
    calls,
    count: (operation: string) => calls.filter((c) => c.operation === operation).length,
    get destroyed() {
      return destroyed;
    },
  };
}

const open = async (t: TestContext, options: Partial<DynamoDbRepositoryOptions>) => {
  const repo = await DynamoDbRepository.open({ table: 'scripted', maxRetries: 3, ...options });
  t.after(() => repo.close());
  return repo;
};

const item = (id: string, state: string, expiresAt: number, extra: Record<string, AttributeValue> = {}) => ({
  id: { S: id },
  state: { S: state },
  expiresAt: { N: String(expiresAt) },
  ...extra,
});

describe('dynamodb options', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['no table', {}, 'repository.table'],
    ['a table name DynamoDB refuses', { table: 'x' }, 'repository.table'],
    ['a non-URL endpoint', { table: 'ids', endpoint: 'localhost 4567' }, 'repository.endpoint'],
    [
      'a string where a number goes',
      { table: 'ids', batchConcurrency: 'many' },
      'repository.batchConcurrency',
    ],
    ['a zero timeout', { table: 'ids', requestTimeoutMs: 0 }, 'repository.requestTimeoutMs'],
    ['fractional retries', { table: 'ids', maxRetries: 1.5 }, 'repository.maxRetries'],
    ['a string boolean', { table: 'ids', createTable: 'yes' }, 'repository.createTable'],
    [
      'half the credentials',
      { table: 'ids', credentials: { accessKeyId: 'a' } },
      'repository.credentials.secretAccessKey',
    ],
    ['an oversized prefix', { table: 'ids', keyPrefix: 'p'.repeat(1025) }, 'repository.keyPrefix'],
    ['an unknown key', { table: 'ids', tabel: 'ids' }, 'repository.tabel'],
  ];
  for (const [label, options, key] of cases) {
    it(`rejects ${label} with a ConfigError naming ${key}`, async () => {
      await assert.rejects(
        DynamoDbRepository.open(options as unknown as DynamoDbRepositoryOptions),
        (error: unknown) => {
          assert.ok(error instanceof ConfigError, String(error));
          assert.equal(error.key, key);
          return true;
        },
      );
    });
  }
});

describe('dynamodb claims against a scripted client', () => {
  it('takes the blocking record from ALL_OLD, with no second read (real DynamoDB)', async (t) => {
    const now = Date.now();
    const fake = scriptedClient((operation) => {
      if (operation === 'PutItem') {
        throw new ConditionalCheckFailedException({
          message: 'The conditional request failed',
          $metadata: {},
          Item: item('2:p:dup', 'in-flight', now + 60_000, {
            leaseExpiresAt: { N: String(now + 30_000) },
            owner: { S: 'other' },
          }),
        });
      }
      throw new Error(`unexpected ${operation}`);
    });
    const repo = await open(t, { client: fake.client, keyPrefix: 'p:' });
    const result = await repo.add('dup', { ttlMs: 60_000, leaseMs: 30_000, owner: 'me' });
    assert.equal(result.added, false);
    assert.equal(!result.added && result.existing.owner, 'other');
    assert.equal(!result.added && result.existing.id, 'dup');
    assert.equal(fake.count('GetItem') + fake.count('BatchGetItem'), 0);
    assert.equal(repo.returnsItemOnConditionFailure, true);
    // The claim asked for the old item on failure.
    assert.equal(
      fake.calls.find((c) => c.operation === 'PutItem')?.input.ReturnValuesOnConditionCheckFailure,
      'ALL_OLD',
    );
  });

  it('without ALL_OLD, reads the blocker back, and retries the put when it vanished meanwhile', async (t) => {
    const now = Date.now();
    let puts = 0;
    const fake = scriptedClient((operation, input) => {
      if (operation === 'PutItem') {
        puts++;
        // First put of "gone" fails, but its blocker is gone by the read; the retry then succeeds.
        if (input.Item?.id?.S === '0:gone' && puts === 1) {
          throw new ConditionalCheckFailedException({ message: 'failed', $metadata: {} });
        }
        if (input.Item?.id?.S?.startsWith('0:taken'))
          throw new ConditionalCheckFailedException({ message: 'x', $metadata: {} });
        return {};
      }
      if (operation === 'GetItem') return {};
      if (operation === 'BatchGetItem') {
        return {
          Responses: {
            scripted: [
              item('0:taken-1', 'confirmed', now + 60_000),
              item('0:taken-2', 'confirmed', now + 60_000),
            ],
          },
        };
      }
      throw new Error(`unexpected ${operation}`);
    });
    const repo = await open(t, { client: fake.client });
    assert.equal((await repo.add('gone', { ttlMs: 60_000 })).added, true);
    assert.equal(fake.count('GetItem'), 1);
    assert.equal(repo.returnsItemOnConditionFailure, false);

    const many = await repo.addMany([{ id: 'taken-1' }, { id: 'new' }, { id: 'taken-2' }], { ttlMs: 60_000 });
    assert.deepEqual(
      many.map((r) => r.added),
      [false, true, false],
    );
    // Blocked ids of a batch are read back together, not one GetItem each.
    assert.equal(fake.count('BatchGetItem'), 1);
    assert.equal(fake.count('GetItem'), 1);
  });

  it('recognises its own claim when a retried put finds the first attempt landed', async (t) => {
    const now = 1_700_000_000_000;
    const mine = item('lost-answer', 'in-flight', now + 60_000, {
      leaseExpiresAt: { N: String(now + 30_000) },
      owner: { S: 'me' },
    });
    const fake = scriptedClient((operation) => {
      if (operation === 'PutItem') {
        throw new ConditionalCheckFailedException({ message: 'failed', $metadata: {}, Item: mine });
      }
      throw new Error(`unexpected ${operation}`);
    });
    const repo = await open(t, { client: fake.client, clock: () => now });
    const claim = await repo.add('lost-answer', { ttlMs: 60_000, leaseMs: 30_000, owner: 'me' });
    assert.equal(claim.added, true);
    // Another owner, or the same owner at another time, is a real blocker.
    assert.equal(
      (await repo.add('lost-answer', { ttlMs: 60_000, leaseMs: 30_000, owner: 'you' })).added,
      false,
    );
    assert.equal(
      (await repo.add('lost-answer', { ttlMs: 60_000, leaseMs: 20_000, owner: 'me' })).added,
      false,
    );
  });

  it('gives up with RepositoryError when the blocker keeps vanishing', async (t) => {
    const fake = scriptedClient((operation) => {
      if (operation === 'PutItem') throw new ConditionalCheckFailedException({ message: 'x', $metadata: {} });
      return {};
    });
    const repo = await open(t, { client: fake.client });
    await assert.rejects(repo.add('flapping', { ttlMs: 60_000 }), RepositoryError);
    assert.equal(fake.count('PutItem'), 5);
  });

  it('treats records past their times as absent, whatever the store still holds', async (t) => {
    const now = Date.now();
    const fake = scriptedClient((operation) => {
      if (operation === 'GetItem') return { Item: item('0:old', 'confirmed', now - 1) };
      if (operation === 'BatchGetItem') {
        return {
          Responses: {
            scripted: [
              item('0:old', 'confirmed', now - 1),
              item('0:lapsed', 'in-flight', now + 60_000, { leaseExpiresAt: { N: String(now - 1) } }),
              item('0:live', 'confirmed', now + 60_000),
            ],
          },
        };
      }
      throw new Error(`unexpected ${operation}`);
    });
    const repo = await open(t, { client: fake.client });
    assert.equal(await repo.contains('old'), false);
    assert.deepEqual(await repo.containsMany(['old', 'lapsed', 'live']), [false, false, true]);
  });
});

describe('dynamodb batches against a scripted client', () => {
  it('retries unprocessed BatchGetItem keys until they are read', async (t) => {
    const now = Date.now();
    let round = 0;
    const fake = scriptedClient((operation, input) => {
      if (operation !== 'BatchGetItem') throw new Error(`unexpected ${operation}`);
      const keys = requested<{ Keys: Record<string, AttributeValue>[] }>(input).Keys;
      round++;
      // Each round processes only the first key and leaves the rest unprocessed.
      const [first, ...rest] = keys;
      return {
        Responses: { scripted: first ? [item(first.id?.S as string, 'confirmed', now + 60_000)] : [] },
        UnprocessedKeys: rest.length > 0 ? { scripted: { Keys: rest } } : {},
      };
    });
    const repo = await open(t, { client: fake.client, maxRetries: 5 });
    assert.deepEqual(await repo.containsMany(['a', 'b', 'c']), [true, true, true]);
    assert.equal(round, 3);
  });

  it('reads 250 ids as three BatchGetItem calls of at most 100 keys', async (t) => {
    const sizes: number[] = [];
    const fake = scriptedClient((operation, input) => {
      if (operation !== 'BatchGetItem') throw new Error(`unexpected ${operation}`);
      sizes.push(requested<{ Keys: unknown[] }>(input).Keys.length);
      return { Responses: { scripted: [] } };
    });
    const repo = await open(t, { client: fake.client });
    const ids = Array.from({ length: 250 }, (_, i) => `id-${i}`);
    assert.deepEqual(await repo.containsMany(ids), Array(250).fill(false));
    assert.deepEqual(
      sizes.sort((a, b) => b - a),
      [100, 100, 50],
    );
  });

  it('fails with RepositoryError when keys stay unprocessed past maxRetries', async (t) => {
    const fake = scriptedClient((operation, input) => {
      if (operation !== 'BatchGetItem') throw new Error(`unexpected ${operation}`);
      return { Responses: { scripted: [] }, UnprocessedKeys: input.RequestItems };
    });
    const repo = await open(t, { client: fake.client, maxRetries: 2 });
    await assert.rejects(repo.containsMany(['a', 'b']), (error: unknown) => {
      assert.ok(error instanceof RepositoryError);
      assert.match(error.message, /unprocessed/);
      return true;
    });
    assert.equal(fake.count('BatchGetItem'), 3);
  });

  it('clear() deletes the namespace in chunks of 25, retrying unprocessed deletes', async (t) => {
    const keys = Array.from({ length: 60 }, (_, i) => ({ id: { S: `3:ns:${i}` } }));
    let firstWrite = true;
    const deleted: string[] = [];
    const fake = scriptedClient((operation, input) => {
      if (operation === 'Scan') {
        assert.equal(input.FilterExpression, 'begins_with(#id, :ns)');
        return { Items: keys };
      }
      if (operation === 'BatchWriteItem') {
        const requests = requested<{ DeleteRequest: { Key: { id: { S: string } } } }[]>(input);
        assert.ok(requests.length <= 25);
        if (firstWrite) {
          firstWrite = false;
          return { UnprocessedItems: { scripted: requests } };
        }
        deleted.push(...requests.map((r) => r.DeleteRequest.Key.id.S));
        return {};
      }
      throw new Error(`unexpected ${operation}`);
    });
    const repo = await open(t, { client: fake.client, keyPrefix: 'ns:' });
    await repo.clear();
    assert.deepEqual(deleted.sort(), keys.map((k) => k.id.S).sort());
  });

  it('leaves an injected client open on close', async () => {
    const fake = scriptedClient(() => ({}));
    const repo = await DynamoDbRepository.open({ table: 'scripted', client: fake.client });
    await repo.close();
    assert.equal(fake.destroyed, false);
  });
});

/** A minimal DynamoDB JSON endpoint: DescribeTable answers, PutItem follows `answers` in turn. */
async function scriptedEndpoint(t: TestContext, answers: [number, object][]) {
  let puts = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on('end', () => {
      const operation = String(req.headers['x-amz-target']).split('.')[1];
      const [status, body] =
        operation === 'DescribeTable' ? [200, { Table: TABLE }] : (answers[puts++] ?? [200, {}]);
      res.writeHead(status, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify(body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { port } = server.address() as { port: number };
  return { endpoint: `http://127.0.0.1:${port}`, puts: () => puts };
}

const throttled: [number, object] = [
  400,
  {
    __type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
    message: 'throughput exceeded',
  },
];

describe('dynamodb throttling (SDK retry strategy with maxRetries)', () => {
  it('retries throttled requests and succeeds', async (t) => {
    const server = await scriptedEndpoint(t, [throttled, throttled, [200, {}]]);
    const repo = await open(t, {
      endpoint: server.endpoint,
      credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      maxRetries: 2,
    });
    assert.equal((await repo.add('x', { ttlMs: 60_000 })).added, true);
    assert.equal(server.puts(), 3);
  });

  it('raises RepositoryError once maxRetries is spent', async (t) => {
    const server = await scriptedEndpoint(t, [throttled, throttled, throttled]);
    const repo = await open(t, {
      endpoint: server.endpoint,
      credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
      maxRetries: 1,
    });
    await assert.rejects(repo.add('x', { ttlMs: 60_000 }), (error: unknown) => {
      assert.ok(error instanceof RepositoryError);
      assert.equal((error.cause as Error).name, 'ProvisionedThroughputExceededException');
      return true;
    });
    assert.equal(server.puts(), 2);
  });
});
