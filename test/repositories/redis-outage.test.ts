/**
 * The Redis server dies mid-run and comes back. The test starts its OWN redis-server on a spare loopback port
 * (never the shared stack's), SIGKILLs it, and restarts it on the same port. Every wait is bounded; nothing
 * asserts on time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { RepositoryError } from '../../src/errors.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { ownRedis } from '../helpers/redis-server.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

const TTL = { ttlMs: 60_000 };

/** Retries `call` until it succeeds: the client reconnects on its own after the restart. Bounded to ~30 s. */
async function untilUp<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (attempt >= 150) throw error;
      await sleep(200);
    }
  }
}

function isRetryableRepositoryError(error: unknown): boolean {
  assert.ok(error instanceof RepositoryError, `expected RepositoryError, got ${String(error)}`);
  assert.equal(error.code, 'IDEM_ERR_REPOSITORY');
  assert.equal(error.retryable, true);
  return true;
}

describe('redis outage', { skip: skipUnlessEnabled('redis') }, () => {
  it('every operation rejects with a retryable RepositoryError while the server is down, then recovers', async (t) => {
    const server = await ownRedis(t);
    const repo = await RedisRepository.open({ url: server.url, commandTimeoutMs: 2_000 });
    t.after(() => repo.close());
    await repo.add('before', { ...TTL, leaseMs: 60_000, owner: 'o' });

    await server.kill();
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['add', () => repo.add('x', TTL)],
      ['addMany', () => repo.addMany([{ id: 'x' }, { id: 'y' }], TTL)],
      ['contains', () => repo.contains('before')],
      ['containsMany', () => repo.containsMany(['before', 'x'])],
      ['get', () => repo.get('before')],
      ['confirm', () => repo.confirm({ id: 'before', owner: 'o' }, TTL)],
      ['confirmMany', () => repo.confirmMany([{ id: 'before', owner: 'o' }], TTL)],
      ['remove', () => repo.remove('before', 'o')],
      ['clear', () => repo.clear()],
    ];
    for (const [name, call] of calls) {
      await assert.rejects(call(), isRetryableRepositoryError, name);
    }

    await server.start();
    // The restarted server kept nothing (--save ''), so the id is new again: the store is usable.
    const again = await untilUp(() => repo.add('before', TTL));
    assert.equal(again.added, true);
    assert.equal((await repo.add('before', TTL)).added, false);
  });

  it('storeFailure "fail": calls raise RepositoryError and nothing is handled as new while down', async (t) => {
    const server = await ownRedis(t);
    const repository = await RedisRepository.open({ url: server.url, commandTimeoutMs: 2_000 });
    t.after(() => repository.close());
    const consumer = new IdempotentConsumer<{ id: string }>({ repository, id: 'id', storeFailure: 'fail' });
    const handled: string[] = [];
    const handle = consumer.wrap(async (message: { id: string }) => {
      handled.push(message.id);
    });

    for (let i = 0; i < 20; i++) assert.equal((await handle({ id: `m${i}` })).outcome, 'processed');
    assert.equal((await handle({ id: 'm0' })).outcome, 'duplicate');

    await server.kill();
    for (let i = 20; i < 40; i++) await assert.rejects(handle({ id: `m${i}` }), isRetryableRepositoryError);
    assert.equal(handled.length, 20, 'a message was handled while the store was down');
    assert.equal(consumer.stats.failOpen, 0);

    await server.start();
    // The first call after the restart may still meet the old connection's failure; retry it like a consumer would.
    assert.equal((await untilUp(() => handle({ id: 'm20' }))).outcome, 'processed');
    for (let i = 21; i < 40; i++) assert.equal((await handle({ id: `m${i}` })).outcome, 'processed');
    assert.equal((await handle({ id: 'm39' })).outcome, 'duplicate');
    assert.deepEqual(
      handled,
      Array.from({ length: 40 }, (_, i) => `m${i}`),
    );
    assert.equal(consumer.stats.processed, 40);
    assert.equal(consumer.stats.failOpen, 0);
  });

  it('storeFailure "process": messages go on as new while down, and are counted', async (t) => {
    const server = await ownRedis(t);
    const repository = await RedisRepository.open({ url: server.url, commandTimeoutMs: 2_000 });
    t.after(() => repository.close());
    const consumer = new IdempotentConsumer<{ id: string }>({
      repository,
      id: 'id',
      storeFailure: 'process',
    });
    const handled: string[] = [];
    const handle = consumer.wrap(async (message: { id: string }) => {
      handled.push(message.id);
    });

    for (let i = 0; i < 10; i++) assert.equal((await handle({ id: `m${i}` })).outcome, 'processed');

    await server.kill();
    for (let i = 10; i < 30; i++) {
      const result = await handle({ id: `m${i}` });
      assert.equal(result.outcome, 'processed');
      assert.equal(result.failOpen, true);
    }
    assert.equal(handled.length, 30);
    assert.equal(consumer.stats.failOpen, 20);

    await server.start();
    await untilUp(() => repository.contains('probe'));
    const failOpenBefore = consumer.stats.failOpen;
    assert.equal((await handle({ id: 'after' })).outcome, 'processed');
    assert.equal((await handle({ id: 'after' })).outcome, 'duplicate');
    assert.equal(consumer.stats.failOpen, failOpenBefore, 'still failing open after the restart');
  });
});
