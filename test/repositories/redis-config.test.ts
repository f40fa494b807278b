import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { ConfigError, RepositoryError } from '../../src/errors.js';
import {
  parseRedisOptions,
  RedisRepository,
  redisDefaults,
  repositoryModule,
} from '../../src/repositories/redis/index.js';
import { sparePort } from '../helpers/redis-server.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const TTL = { ttlMs: 60_000 };

/** Opens a repository on the stack's server that clears its prefix and closes after the test. */
async function scratch(t: TestContext, keyPrefix: string): Promise<RedisRepository> {
  const repo = await RedisRepository.open({ url: endpoints.redisUrl, keyPrefix });
  t.after(async () => {
    if (!repo.closed) await repo.clear();
    await repo.close();
  });
  return repo;
}

/** Asserts a ConfigError keyed `key` whose message names the setting (or is exactly `message`). */
function configError(key: string, message?: string) {
  return (error: unknown) => {
    assert.ok(error instanceof ConfigError, String(error));
    assert.equal(error.key, key);
    if (message !== undefined) assert.equal(error.message, message);
    else assert.ok(error.message.includes(key.replace(/^repository\./, '')), error.message);
    return true;
  };
}

describe('redis options', () => {
  it('applies the defaults written once in options.ts', () => {
    const parsed = repositoryModule.optionsSchema.parse({ url: 'redis://127.0.0.1:6379' });
    assert.equal(parsed.keyPrefix, redisDefaults.keyPrefix);
    assert.equal(parsed.commandTimeoutMs, redisDefaults.commandTimeoutMs);
    assert.equal(parsed.connectTimeoutMs, redisDefaults.connectTimeoutMs);
    assert.equal(parsed.maxRetriesPerRequest, redisDefaults.maxRetriesPerRequest);
    assert.equal(repositoryModule.type, 'redis');
  });

  it('names the offending key in every config error', () => {
    assert.throws(
      () => parseRedisOptions({}),
      configError(
        'repository.url',
        'option url of RedisRepository.open(...): is required: set url, host or cluster',
      ),
    );
    assert.throws(
      () => parseRedisOptions({ url: 'http://127.0.0.1' }),
      configError(
        'repository.url',
        'option url of RedisRepository.open(...): must be a redis:// or rediss:// URL, got "http://127.0.0.1"',
      ),
    );
    assert.throws(() => parseRedisOptions({ url: 'not a url' }), configError('repository.url'));
    assert.throws(
      () => parseRedisOptions({ url: 'redis://127.0.0.1', keyPrefix: 5 }),
      configError('repository.keyPrefix'),
    );
    assert.throws(
      () => parseRedisOptions({ url: 'redis://127.0.0.1', keyPrefix: '' }),
      configError('repository.keyPrefix'),
    );
    assert.throws(
      () => parseRedisOptions({ url: 'redis://127.0.0.1', commandTimeoutMs: -1 }),
      configError('repository.commandTimeoutMs'),
    );
    assert.throws(
      () => parseRedisOptions({ url: 'redis://127.0.0.1', bogus: 1 }),
      configError('repository.bogus'),
    );
    assert.throws(
      () => parseRedisOptions({ url: 'redis://127.0.0.1', cluster: ['127.0.0.1:7000'] }),
      configError('repository.cluster'),
    );
    assert.throws(() => parseRedisOptions({ cluster: ['nohost'] }), configError('repository.cluster.0'));
    assert.throws(() => parseRedisOptions({ port: 6379 }), configError('repository.url'));
    assert.throws(
      () => new RedisRepository({ client: new Redis({ lazyConnect: true }), keyPrefix: '' }),
      configError('repository.keyPrefix'),
    );
  });

  it('refuses a malformed %-escape in the URL and a timeout above 2^31 - 1 ms, naming the key', () => {
    assert.throws(
      () => parseRedisOptions({ url: 'redis://:50%off@127.0.0.1:6379' }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.key === 'repository.url' &&
        /malformed %-escape in its password/.test(error.message) &&
        !error.message.includes('50%off'),
    );
    for (const key of ['connectTimeoutMs', 'commandTimeoutMs']) {
      assert.throws(
        () => parseRedisOptions({ url: 'redis://127.0.0.1:6379', [key]: 2 ** 31 }),
        (error: unknown) => error instanceof ConfigError && error.key === `repository.${key}`,
      );
    }
  });

  it('accepts url, host/port, cluster seeds and tls forms', () => {
    assert.equal(
      parseRedisOptions({ url: 'rediss://u:p@cache.example:6380/2' }).url,
      'rediss://u:p@cache.example:6380/2',
    );
    assert.equal(parseRedisOptions({ host: '127.0.0.1', port: 6390, tls: true }).port, 6390);
    assert.equal(
      parseRedisOptions({ cluster: ['127.0.0.1:7000', { host: '127.0.0.1', port: 7001 }] }).cluster?.length,
      2,
    );
    assert.deepEqual(parseRedisOptions({ url: 'redis://h', tls: { rejectUnauthorized: false } }).tls, {
      rejectUnauthorized: false,
    });
  });
});

describe('redis connection problems at create time', () => {
  it('an unreachable server rejects promptly with a retryable error naming the key and address', async () => {
    const port = await sparePort();
    await assert.rejects(
      repositoryModule.create(parseRedisOptions({ url: `redis://user:s3cret@127.0.0.1:${port}` })),
      (error: unknown) => {
        assert.ok(error instanceof RepositoryError, String(error));
        assert.equal(error.retryable, true);
        assert.ok(error.message.includes('repository.url'), error.message);
        assert.ok(error.message.includes(`127.0.0.1:${port}`), error.message);
        assert.ok(!error.message.includes('s3cret'), 'password leaked into the message');
        return true;
      },
    );
    await assert.rejects(RedisRepository.open({ host: '127.0.0.1', port }), (error: unknown) => {
      assert.ok(error instanceof RepositoryError);
      assert.ok(error.message.includes('repository.host'), error.message);
      return true;
    });
  });

  it('a server that accepts the connection but never answers rejects within the configured timeouts', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket)).listen(0, '127.0.0.1');
    await new Promise((resolve) => silent.once('listening', resolve));
    const { port } = silent.address() as { port: number };
    try {
      await assert.rejects(
        RedisRepository.open({
          url: `redis://127.0.0.1:${port}`,
          connectTimeoutMs: 300,
          commandTimeoutMs: 300,
        }),
        (error: unknown) => {
          assert.ok(error instanceof RepositoryError);
          assert.ok(error.message.includes('repository.url'), error.message);
          return true;
        },
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});

describe('redis repository details', { skip: skipUnlessEnabled('redis') }, () => {
  it('clear() deletes only its own prefix, even one with glob characters', async (t) => {
    const run = randomUUID().slice(0, 8);
    const mine = await scratch(t, `it:${run}:a*[x]`);
    const near = await scratch(t, `it:${run}:aZ[x]`);
    const other = await scratch(t, `it:${run}:b:`);
    const ids = Array.from({ length: 2_500 }, (_, i) => `id-${i}`);
    for (const repo of [mine, near, other]) {
      await repo.addMany(
        ids.map((id) => ({ id })),
        TTL,
      );
    }
    await mine.clear();
    assert.deepEqual(await mine.containsMany(['id-0', 'id-2499']), [false, false]);
    assert.deepEqual(await near.containsMany(['id-0', 'id-2499']), [true, true]);
    assert.deepEqual(await other.containsMany(['id-0', 'id-2499']), [true, true]);
  });

  it('wraps a caller’s client without closing it, and honours an ioredis keyPrefix on that client', async (t) => {
    const client = new Redis(endpoints.redisUrl, { keyPrefix: `it:${randomUUID().slice(0, 8)}:client:` });
    t.after(() => client.quit());
    const repo = new RedisRepository({ client, keyPrefix: 'repo:' });
    const id = randomUUID();
    assert.equal((await repo.add(id, { ...TTL, leaseMs: 60_000, owner: 'o' })).added, true);
    assert.equal(await repo.confirm({ id, owner: 'o' }, TTL), true);
    assert.equal((await repo.get(id))?.state, 'confirmed');
    await repo.clear();
    assert.equal(await repo.contains(id), false);
    await repo.close();
    assert.equal(client.status, 'ready', 'a borrowed client was closed');
    assert.equal(await client.ping(), 'PONG');
  });

  it('stores the record with a Redis TTL from forgetAt, rounded up (garbage collection only)', async (t) => {
    const keyPrefix = `it:${randomUUID().slice(0, 8)}:`;
    const repo = await scratch(t, keyPrefix);
    const client = repo.client as Redis;
    await repo.add('claimed', { ttlMs: 600_000, leaseMs: 30_000, owner: 'o' });
    await repo.add('long-lease', { ttlMs: 1_000, leaseMs: 300_000, owner: 'o' });
    await repo.add('marked', { ttlMs: 600_000 });
    const claimPx = await client.pttl(repo.redisKey('claimed'));
    const longLeasePx = await client.pttl(repo.redisKey('long-lease'));
    const markPx = await client.pttl(repo.redisKey('marked'));
    // An in-flight record outlives its lease (a slow owner may still confirm): PX is the later of lease and TTL.
    assert.ok(
      claimPx > 30_000 && claimPx <= 600_000,
      `in-flight PX follows the TTL past the lease, got ${claimPx}`,
    );
    assert.ok(
      longLeasePx > 1_000 && longLeasePx <= 300_000,
      `in-flight PX covers the lease, got ${longLeasePx}`,
    );
    assert.ok(markPx > 30_000 && markPx <= 600_000, `confirmed PX follows the TTL, got ${markPx}`);
    await repo.confirm({ id: 'long-lease', owner: 'o' }, { ttlMs: 600_000 });
    assert.ok(
      (await client.pttl(repo.redisKey('long-lease'))) > 300_000,
      'confirm did not set the PX from its TTL',
    );
  });

  it('reads, confirms and renews records of an older version, which have no first-seen time', async (t) => {
    const repo = await scratch(t, `it:${randomUUID().slice(0, 8)}:`);
    const client = repo.client as Redis;
    const until = Date.now() + 600_000;
    // 0.1.0's claim (six fields) and mark with a result (seven fields).
    await client.set(
      repo.redisKey('claim'),
      `f\u0001${until}\u0001${until}\u0001o\u0001\u0001fp`,
      'PX',
      600_000,
    );
    await client.set(repo.redisKey('mark'), `c\u0001${until}\u0001\u0001\u0001\u0001\u0001r`, 'PX', 600_000);
    assert.deepEqual(await repo.get('mark'), {
      id: 'mark',
      state: 'confirmed',
      expiresAt: until,
      result: 'r',
    });
    assert.equal(await repo.renew({ id: 'claim', owner: 'o' }, { leaseMs: 60_000 }), true);
    assert.equal(await repo.confirm({ id: 'claim', owner: 'o' }, { ttlMs: 60_000, result: 'done' }), true);
    const confirmed = await repo.get('claim');
    assert.equal(confirmed?.state, 'confirmed');
    assert.equal(confirmed?.fingerprint, 'fp');
    assert.equal(confirmed?.result, 'done');
    assert.equal(confirmed?.firstSeenAt, undefined);
    // A claim of this version keeps its first-seen time through a confirm with a result.
    const added = await repo.add('new', {
      ttlMs: 60_000,
      leaseMs: 60_000,
      owner: 'o',
      now: Date.now() - 1_000,
    });
    assert.equal(await repo.confirm({ id: 'new', owner: 'o' }, { ttlMs: 60_000, result: 'x' }), true);
    assert.deepEqual(
      [(await repo.get('new'))?.result, (await repo.get('new'))?.firstSeenAt],
      ['x', added.added ? added.record.firstSeenAt : -1],
    );
  });

  it('keys a namespace so that no prefix reads or clears another it is a prefix of', async (t) => {
    const run = `it:${randomUUID().slice(0, 8)}`;
    const app = await scratch(t, `${run}:app:`);
    const orders = await scratch(t, `${run}:app:orders:`);
    const bare = await scratch(t, `${run}:app`);
    const percent = await scratch(t, `${run}%3Aapp:`);
    assert.equal((await orders.add('42', TTL)).added, true);
    assert.equal(await app.contains('orders:42'), false, 'app: sees app:orders:42');
    assert.equal((await app.add('orders:42', TTL)).added, true);
    assert.equal((await percent.add('42', TTL)).added, true, 'an escaped-looking prefix met another');
    // A trailing ':' is optional: `app` and `app:` are one namespace.
    assert.equal(await bare.contains('orders:42'), true);
    await app.clear();
    assert.equal(await orders.contains('42'), true, 'clear() of app: deleted app:orders: ids');
    assert.equal(await percent.contains('42'), true);
    assert.equal(await bare.contains('orders:42'), false);
    // The default prefix, and any without inner ':' or '%', keep the key layout of earlier versions.
    const plain = new RedisRepository({ client: orders.client, keyPrefix: 'idem:' });
    assert.equal(plain.redisKey('order-1'), 'idem:order-1');
    assert.equal(orders.redisKey('42'), `${run.replace(':', '%3A')}%3Aapp%3Aorders:42`);
  });

  it('a large batch (over one script call) answers per position in one round trip', async (t) => {
    const keyPrefix = `it:${randomUUID().slice(0, 8)}:`;
    const repo = await scratch(t, keyPrefix);
    const ids = Array.from({ length: 2_345 }, (_, i) => `big-${i}`);
    await repo.add('big-7', TTL, { eventTime: 7 });
    const claim = { ...TTL, leaseMs: 60_000, owner: 'w' };
    const results = await repo.addMany(
      ids.map((id, i) => ({ id, ...(i % 2 ? { fingerprint: `f${i}` } : {}) })),
      claim,
    );
    assert.equal(results.filter((r) => r.added).length, ids.length - 1);
    const seventh = results[7];
    assert.equal(seventh && !seventh.added && seventh.existing.eventTime, 7);
    assert.equal((await repo.get('big-2001'))?.fingerprint, 'f2001');
    const confirmed = await repo.confirmMany(
      ids.map((id) => ({ id, owner: 'w' })),
      TTL,
    );
    assert.equal(confirmed.filter(Boolean).length, ids.length - 1);
    assert.equal(confirmed[7], false);
    assert.equal((await repo.get('big-2001'))?.fingerprint, 'f2001', 'confirm lost the fingerprint');
  });
});
