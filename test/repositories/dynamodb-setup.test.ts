/**
 * Opening the DynamoDB repository against dynalite: table checks, table creation (and dynalite's missing TTL API),
 * the stored item format, and what dynalite does with ReturnValuesOnConditionCheckFailure.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { after, before, describe, it, type TestContext } from 'node:test';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
} from '@aws-sdk/client-dynamodb';
import { ConfigError } from '../../src/errors.js';
import { DynamoDbRepository, type DynamoDbRepositoryOptions } from '../../src/repositories/dynamodb/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const connection = {
  endpoint: endpoints.dynamodbEndpoint,
  credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
};
const silent = { warn: () => {} };

describe('dynamodb setup against dynalite', { skip: skipUnlessEnabled('dynamodb') }, () => {
  const admin = new DynamoDBClient({
    region: 'us-east-1',
    ...connection,
    credentials: { ...connection.credentials },
  });
  const tables: string[] = [];
  const newTable = () => {
    const name = `idem-setup-${randomUUID().slice(0, 8)}`;
    tables.push(name);
    return name;
  };
  const open = async (t: TestContext, options: Partial<DynamoDbRepositoryOptions> & { table: string }) => {
    const repo = await DynamoDbRepository.open({ ...connection, logger: silent, ...options });
    t.after(() => repo.close());
    return repo;
  };
  let shared = '';
  /** The stored items of these ids, found whatever the key layout: by the prefix and id in their key. */
  const rawItems = async (table: string, ids: string[], prefix: string) => {
    const { Items = [] } = await admin.send(new ScanCommand({ TableName: table, ConsistentRead: true }));
    return ids.map((id) => Items.find((item) => item.id?.S?.endsWith(prefix + id)));
  };

  before(async () => {
    shared = newTable();
    const repo = await DynamoDbRepository.open({
      ...connection,
      table: shared,
      createTable: true,
      logger: silent,
    });
    await repo.close();
  });

  after(async () => {
    await Promise.all(
      tables.map((TableName) => admin.send(new DeleteTableCommand({ TableName })).catch(() => {})),
    );
    admin.destroy();
  });

  it('names repository.table when the table is missing and createTable is off', async () => {
    const table = `idem-missing-${randomUUID().slice(0, 8)}`;
    await assert.rejects(DynamoDbRepository.open({ ...connection, table }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.key, 'repository.table');
      assert.match(error.message, new RegExp(table));
      assert.match(error.message, /createTable/);
      return true;
    });
  });

  it('names repository.endpoint when nothing answers there', async () => {
    // A port the OS just handed out and took back: nothing listens on it.
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const endpoint = `http://127.0.0.1:${port}`;
    await assert.rejects(
      DynamoDbRepository.open({
        ...connection,
        endpoint,
        table: 'ids',
        maxRetries: 0,
        requestTimeoutMs: 500,
      }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError, String(error));
        assert.equal(error.key, 'repository.endpoint');
        assert.match(error.message, new RegExp(endpoint));
        return true;
      },
    );
  });

  it('names repository.table when the table has another key schema', async () => {
    const table = newTable();
    await admin.send(
      new CreateTableCommand({
        TableName: table,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: 'pk', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'pk', KeyType: 'HASH' }],
      }),
    );
    await assert.rejects(DynamoDbRepository.open({ ...connection, table }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String(error));
      assert.equal(error.key, 'repository.table');
      assert.match(error.message, /pk/);
      return true;
    });
  });

  it('creates the table, and says once that dynalite cannot enable TTL', async (t) => {
    const table = newTable();
    const warnings: string[] = [];
    await open(t, { table, createTable: true, logger: { warn: (m) => warnings.push(m) } });
    assert.equal(warnings.length, 1);
    assert.match(warnings[0] as string, /UpdateTimeToLive/);
    // The table now exists: opening again neither creates nor warns.
    const again = await open(t, { table, createTable: true, logger: { warn: (m) => warnings.push(m) } });
    assert.equal(warnings.length, 1);
    assert.equal((await again.add('x', { ttlMs: 60_000 })).added, true);
  });

  it('without a logger, the TTL notice is a process warning with code IDEM_DYNAMODB', async (t) => {
    const seen: Error[] = [];
    const onWarning = (warning: Error) => {
      if ((warning as Error & { code?: string }).code === 'IDEM_DYNAMODB') seen.push(warning);
    };
    process.on('warning', onWarning);
    t.after(() => process.off('warning', onWarning));
    const repo = await DynamoDbRepository.open({ ...connection, table: newTable(), createTable: true });
    t.after(() => repo.close());
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    assert.equal(seen.length, 1);
  });

  it('stores the documented attributes under <prefix bytes>:<prefix><id>, with ttl in epoch seconds, rounded up', async (t) => {
    const repo = await open(t, { table: shared, keyPrefix: 'fmt:' });
    const claim = await repo.add(
      'order-1',
      { ttlMs: 60_000, leaseMs: 5_000, owner: 'w1' },
      { eventTime: 1_700_000_000_123, fingerprint: 'sha256:ab' },
    );
    assert.ok(claim.added);
    const raw = async () =>
      (
        await admin.send(
          new GetItemCommand({
            TableName: shared,
            Key: { id: { S: '4:fmt:order-1' } },
            ConsistentRead: true,
          }),
        )
      ).Item;
    const inFlight = await raw();
    assert.equal(inFlight?.state?.S, 'in-flight');
    assert.equal(inFlight?.owner?.S, 'w1');
    assert.equal(inFlight?.leaseExpiresAt?.N, String(claim.record.leaseExpiresAt));
    assert.equal(inFlight?.expiresAt?.N, String(claim.record.expiresAt));
    assert.equal(inFlight?.eventTime?.N, '1700000000123');
    assert.equal(inFlight?.fingerprint?.S, 'sha256:ab');
    // An unconfirmed claim is kept past its lease until its retention ends, so a slow owner can still confirm.
    assert.equal(Number(inFlight?.ttl?.N), Math.ceil(claim.record.expiresAt / 1000));

    assert.equal(await repo.confirm({ id: 'order-1', owner: 'w1' }, { ttlMs: 60_000 }), true);
    const confirmed = await raw();
    const record = await repo.get('order-1');
    assert.equal(confirmed?.state?.S, 'confirmed');
    assert.equal(confirmed?.owner, undefined);
    assert.equal(confirmed?.leaseExpiresAt, undefined);
    assert.equal(Number(confirmed?.ttl?.N), Math.ceil((record?.expiresAt as number) / 1000));
  });

  it('keeps event-time records for the wall-clock span of their stream-time life', async (t) => {
    const repo = await open(t, { table: shared, keyPrefix: 'evt:' });
    const streamTime = 1_600_000_000_000; // years ago
    const before = Date.now();
    await repo.add('replayed', { ttlMs: 3_600_000, now: streamTime });
    const item = (
      await admin.send(
        new GetItemCommand({ TableName: shared, Key: { id: { S: '4:evt:replayed' } }, ConsistentRead: true }),
      )
    ).Item;
    // Not a 2020 TTL, which DynamoDB would sweep at once: an hour from now.
    assert.ok(Number(item?.ttl?.N) >= Math.ceil((before + 3_600_000) / 1000));
  });

  it('treats items past their times as absent and claimable, though the store still has them', async (t) => {
    const repo = await open(t, { table: shared, keyPrefix: 'lag:' });
    const past = Date.now() - 1_000;
    // As DynamoDB leaves them for up to 48 h after their TTL.
    await admin.send(
      new PutItemCommand({
        TableName: shared,
        Item: {
          id: { S: '4:lag:stale' },
          state: { S: 'confirmed' },
          expiresAt: { N: String(past) },
          ttl: { N: String(Math.ceil(past / 1000)) },
        },
      }),
    );
    await admin.send(
      new PutItemCommand({
        TableName: shared,
        Item: {
          id: { S: '4:lag:lapsed' },
          state: { S: 'in-flight' },
          expiresAt: { N: String(past + 3_600_000) },
          leaseExpiresAt: { N: String(past) },
          owner: { S: 'crashed' },
        },
      }),
    );
    assert.deepEqual(await repo.containsMany(['stale', 'lapsed']), [false, false]);
    assert.equal(await repo.get('stale'), undefined);
    assert.equal((await repo.add('stale', { ttlMs: 60_000 })).added, true);
    assert.equal(
      (await repo.add('lapsed', { ttlMs: 60_000, leaseMs: 60_000, owner: 'rescuer' })).added,
      true,
    );
  });

  it('keeps an unconfirmed claim in the store past its lease, so a slow handler can still confirm it', async (t) => {
    const repo = await open(t, { table: shared, keyPrefix: 'slow:' });
    const claim = await repo.add('order', { ttlMs: 60_000, leaseMs: 1_000, owner: 'slow' });
    assert.ok(claim.added);
    const [item] = await rawItems(shared, ['order'], 'slow:');
    // The TTL sweeper only cleans up: it must not remove the claim at its lease end, before the retention.
    assert.ok(Number(item?.ttl?.N) >= Math.ceil(claim.record.expiresAt / 1000));
  });

  it('confirms a claim after its lease passed when nobody took it over; a taken-over one stays the new owner’s', async (t) => {
    const repo = await open(t, { table: shared, keyPrefix: 'lease:' });
    await repo.add('kept', { ttlMs: 60_000, leaseMs: 200, owner: 'slow' });
    await repo.add('taken', { ttlMs: 60_000, leaseMs: 200, owner: 'slow' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal((await repo.add('taken', { ttlMs: 60_000, leaseMs: 60_000, owner: 'next' })).added, true);
    assert.equal(await repo.confirm({ id: 'kept', owner: 'slow' }, { ttlMs: 60_000 }), true);
    assert.equal((await repo.get('kept'))?.state, 'confirmed');
    assert.equal(await repo.confirm({ id: 'taken', owner: 'slow' }, { ttlMs: 60_000 }), false);
    const taken = await repo.get('taken');
    assert.equal(taken?.state, 'in-flight');
    assert.equal(taken?.owner, 'next');
  });

  it('namespaces by prefix never touch: "app:" neither sees nor clears "orders:42" of "app:orders:"', async (t) => {
    const app = await open(t, { table: shared, keyPrefix: 'app:' });
    const orders = await open(t, { table: shared, keyPrefix: 'app:orders:' });
    await orders.add('42', { ttlMs: 60_000 }, { fingerprint: 'orders' });
    assert.equal(await app.contains('orders:42'), false);
    assert.deepEqual(await app.getMany(['orders:42', 'other']), [undefined, undefined]);
    const mine = await app.add('orders:42', { ttlMs: 60_000, leaseMs: 60_000, owner: 'app' });
    assert.equal(mine.added, true);
    assert.equal((await orders.get('42'))?.fingerprint, 'orders');
    await app.clear();
    assert.equal(await app.contains('orders:42'), false);
    assert.equal((await orders.get('42'))?.fingerprint, 'orders');
    // And the other way round: the longer prefix never reaches into the shorter one.
    await app.add('x', { ttlMs: 60_000 });
    await orders.clear();
    assert.equal(await orders.contains('42'), false);
    assert.equal(await app.contains('x'), true);
  });

  it('an empty prefix is a namespace of its own too', async (t) => {
    const table = newTable();
    const bare = await open(t, { table, createTable: true });
    const app = await open(t, { table, keyPrefix: 'app:' });
    await app.add('1', { ttlMs: 60_000 });
    await bare.add('app:2', { ttlMs: 60_000 });
    assert.equal(await bare.contains('app:1'), false);
    assert.equal(await app.contains('2'), false);
    await bare.clear();
    assert.equal(await app.contains('1'), true);
  });

  it('detects whether the endpoint returns the blocking item on a failed claim', async (t) => {
    const repo = await open(t, { table: shared, keyPrefix: 'old:' });
    assert.equal(repo.returnsItemOnConditionFailure, undefined);
    await repo.add('dup', { ttlMs: 60_000 });
    const again = await repo.add('dup', { ttlMs: 60_000 });
    assert.equal(again.added, false);
    // dynalite 4 ignores ReturnValuesOnConditionCheckFailure (false); real DynamoDB returns the item (true).
    assert.equal(typeof repo.returnsItemOnConditionFailure, 'boolean');
    t.diagnostic(`endpoint returns ALL_OLD on condition failure: ${repo.returnsItemOnConditionFailure}`);
  });
});
