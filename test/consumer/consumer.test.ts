import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdempotentConsumer, type StoreCall } from '../../src/consumer/index.js';
import {
  InProgressError,
  InvalidIdError,
  NoMessageIdError,
  RepositoryError,
  StoredFailureError,
} from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';

interface Msg {
  id?: string | null;
  meta?: { key?: string };
  n?: number;
}

/** A memory store on a hand-driven clock, so TTL and lease tests step over time instead of sleeping. */
function setup(options: Partial<ConstructorParameters<typeof IdempotentConsumer<Msg>>[0]> = {}) {
  let now = 1_000_000;
  const repository = new MemoryRepository({ clock: () => now });
  const consumer = new IdempotentConsumer<Msg>({
    repository,
    id: 'id',
    ttlMs: 10_000,
    leaseMs: 1_000,
    ...options,
  });
  return { consumer, repository, advance: (ms: number) => (now += ms) };
}

describe('IdempotentConsumer.wrap', () => {
  it('runs the handler once per id and reports duplicates', async () => {
    const { consumer } = setup();
    const seen: number[] = [];
    const handle = consumer.wrap(async (m: Msg) => {
      seen.push(m.n ?? 0);
      return `done ${m.n}`;
    });
    assert.deepEqual(await handle({ id: 'a', n: 1 }), { outcome: 'processed', id: 'a', result: 'done 1' });
    const dup = await handle({ id: 'a', n: 2 });
    assert.equal(dup.outcome, 'duplicate');
    assert.equal(dup.existing?.state, 'confirmed');
    assert.deepEqual(seen, [1]);
    assert.equal(consumer.stats.processed, 1);
    assert.equal(consumer.stats.duplicate, 1);
  });

  it('takes the id from a dotted path or a function, numbers included', async () => {
    const byPath = setup({ id: 'meta.key' }).consumer;
    const handle = byPath.wrap(() => 'ok');
    assert.equal((await handle({ meta: { key: 'k' } })).outcome, 'processed');
    assert.equal((await handle({ meta: { key: 'k' } })).outcome, 'duplicate');
    await assert.rejects(handle({ meta: {} }), NoMessageIdError);
    const byFn = setup({ id: (m) => m.n }).consumer.wrap(() => 'ok');
    assert.equal((await byFn({ n: 7 })).id, '7');
    assert.equal((await byFn({ n: 7 })).outcome, 'duplicate');
  });

  it('runs exactly one handler when 100 concurrent calls share an id (eager)', async () => {
    const { consumer } = setup({ inProgress: 'duplicate' });
    let runs = 0;
    const handle = consumer.wrap(async () => {
      runs++;
      await new Promise((r) => setTimeout(r, 5));
    });
    const results = await Promise.all(Array.from({ length: 100 }, () => handle({ id: 'same' })));
    assert.equal(runs, 1);
    assert.equal(results.filter((r) => r.outcome === 'processed').length, 1);
    assert.equal(results.filter((r) => r.outcome === 'duplicate').length, 99);
  });

  it('lets concurrent duplicates both run in lazy mode, as documented', async () => {
    const { consumer } = setup({ mode: 'lazy' });
    let runs = 0;
    const handle = consumer.wrap(async () => {
      runs++;
      await new Promise((r) => setTimeout(r, 5));
    });
    await Promise.all([handle({ id: 'x' }), handle({ id: 'x' })]);
    assert.equal(runs, 2);
    assert.equal((await handle({ id: 'x' })).outcome, 'duplicate');
  });

  it('confirms after success and removes the claim after failure, rethrowing the handler error', async () => {
    const { consumer, repository } = setup();
    const boom = new Error('boom');
    let fail = true;
    const handle = consumer.wrap(async () => {
      if (fail) throw boom;
      return 'ok';
    });
    await assert.rejects(handle({ id: 'r' }), (e) => e === boom);
    assert.equal(await repository.contains('r'), false);
    fail = false;
    assert.equal((await handle({ id: 'r' })).outcome, 'processed');
    assert.equal((await repository.get('r'))?.state, 'confirmed');
    assert.equal(consumer.stats.failed, 1);
  });

  it('keeps the failure with the id when removeOnFailure is false (at-most-once, replayed)', async () => {
    const { consumer, repository, advance } = setup({ removeOnFailure: false });
    let runs = 0;
    const handle = consumer.wrap(async () => {
      runs++;
      throw new Error('once');
    });
    await assert.rejects(handle({ id: 'k' }), { message: 'once' });
    // Kept for the retention TTL, not only until the lease lapses.
    assert.equal((await repository.get('k'))?.state, 'confirmed');
    advance(5_000);
    await assert.rejects(handle({ id: 'k' }), (e) => e instanceof StoredFailureError && e.message === 'once');
    assert.equal(runs, 1);
  });

  it('reports a live claim as in-progress (typed, retryable) until its lease ends', async () => {
    const { consumer, repository, advance } = setup();
    // A worker that claimed and then crashed before confirming.
    await repository.add('c', { ttlMs: 10_000, leaseMs: 1_000, owner: 'crashed' });
    const handle = consumer.wrap(() => 'ok');
    await assert.rejects(handle({ id: 'c' }), (e) => e instanceof InProgressError && e.retryable);
    assert.equal(consumer.stats.inProgress, 1);
    advance(1_001);
    assert.equal((await handle({ id: 'c' })).outcome, 'processed');
  });

  it('treats in-progress as duplicate when configured', async () => {
    const { consumer, repository } = setup({ inProgress: 'duplicate' });
    await repository.add('c', { ttlMs: 10_000, leaseMs: 1_000, owner: 'other' });
    assert.equal((await consumer.process({ id: 'c' }, () => 'x')).outcome, 'duplicate');
  });

  it('forgets a confirmed id after the TTL', async () => {
    const { consumer, advance } = setup();
    const handle = consumer.wrap(() => 'ok');
    await handle({ id: 't' });
    advance(9_999);
    assert.equal((await handle({ id: 't' })).outcome, 'duplicate');
    advance(2);
    assert.equal((await handle({ id: 't' })).outcome, 'processed');
  });

  it('hands duplicates to the handler when skipDuplicate is false, and calls onDuplicate either way', async () => {
    const hooked: string[] = [];
    const onDuplicate = (_m: Msg, ctx: { id: string | undefined }) => {
      hooked.push(ctx.id ?? '');
    };
    const { consumer } = setup({ skipDuplicate: false, onDuplicate });
    const contexts: boolean[] = [];
    const handle = consumer.wrap((_m, ctx) => {
      contexts.push(ctx.duplicate);
      return ctx.duplicate ? 'dup' : 'new';
    });
    await handle({ id: 'd' });
    const second = await handle({ id: 'd' });
    assert.equal(second.outcome, 'duplicate');
    assert.equal(second.result, 'dup');
    assert.deepEqual(contexts, [false, true]);
    const skipping = setup({ onDuplicate }).consumer.wrap(() => 'x');
    await skipping({ id: 'e' });
    await skipping({ id: 'e' });
    assert.deepEqual(hooked, ['d', 'e']);
  });

  it("rejects a message without id by default and forwards it with nullId: 'forward'", async () => {
    const reject = setup().consumer.wrap(() => 1);
    await assert.rejects(reject({}), NoMessageIdError);
    await assert.rejects(reject({ id: null }), NoMessageIdError);
    const forward = setup({ nullId: 'forward', onWarning: () => {} }).consumer;
    let runs = 0;
    const handle = forward.wrap(() => ++runs);
    assert.equal((await handle({ id: null })).outcome, 'no-id');
    assert.equal((await handle({})).outcome, 'no-id');
    assert.equal(runs, 2);
    assert.equal(forward.stats.noId, 2);
    // An empty id is a value, not a missing id: no store can hold it, so it is rejected (as the README says),
    // never forwarded undeduplicated.
    await assert.rejects(handle({ id: '' }), InvalidIdError);
    assert.equal(runs, 2);
  });

  it('rejects an oversized id with InvalidIdError without running the handler', async () => {
    const { consumer } = setup();
    let runs = 0;
    await assert.rejects(
      consumer.process({ id: 'x'.repeat(2000) }, () => runs++),
      InvalidIdError,
    );
    assert.equal(runs, 0);
  });
});

describe('store failure policy', () => {
  /** A store whose every call fails, as a server that went away would. */
  class DownRepository extends MemoryRepository {
    override async add(): Promise<never> {
      throw new RepositoryError('connection refused');
    }
    override async addMany(): Promise<never> {
      throw new RepositoryError('connection refused');
    }
  }

  it('fail: raises a typed store error and runs nothing', async () => {
    const consumer = new IdempotentConsumer<Msg>({ repository: new DownRepository(), id: 'id' });
    let runs = 0;
    await assert.rejects(
      consumer.process({ id: 'a' }, () => runs++),
      (e) => e instanceof RepositoryError && e.cause === undefined && /connection refused/.test(e.message),
    );
    await assert.rejects(
      consumer.processBatch([{ id: 'a' }, { id: 'b' }], () => runs++),
      RepositoryError,
    );
    assert.equal(runs, 0);
  });

  it('process: handles messages as new and counts them', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new DownRepository(),
      id: 'id',
      storeFailure: 'process',
    });
    let runs = 0;
    const one = await consumer.process({ id: 'a' }, () => runs++);
    assert.equal(one.outcome, 'processed');
    assert.equal(one.failOpen, true);
    const batch = await consumer.processBatch([{ id: 'b' }, { id: 'c' }, { id: 'b' }], () => runs++);
    assert.deepEqual(
      batch.results.map((r) => r.outcome),
      ['processed', 'processed', 'duplicate'],
    );
    assert.equal(runs, 3);
    assert.equal(consumer.stats.failOpen, 3);
  });
});

describe('IdempotentConsumer.processBatch', () => {
  it('resolves duplicates inside the batch first (first wins) and makes one store call', async () => {
    const { consumer, repository } = setup();
    await repository.add('old', { ttlMs: 10_000 });
    let addManyCalls = 0;
    const original = repository.addMany.bind(repository);
    repository.addMany = async (...args) => {
      addManyCalls++;
      return original(...args);
    };
    const handled: number[] = [];
    const batch = [
      { id: 'a', n: 0 },
      { id: 'b', n: 1 },
      { id: 'a', n: 2 },
      { id: 'old', n: 3 },
      { id: null, n: 4 },
    ];
    const { results } = await consumer.processBatch(batch, (m) => {
      handled.push(m.n ?? -1);
      return m.n;
    });
    assert.equal(addManyCalls, 1);
    assert.deepEqual(handled, [0, 1]);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'processed', 'duplicate', 'duplicate', 'failed'],
    );
    assert.ok(results[4]?.error instanceof NoMessageIdError);
    assert.equal((await repository.get('a'))?.state, 'confirmed');
    assert.deepEqual(
      { ...consumer.stats },
      {
        processed: 2,
        duplicate: 2,
        inProgress: 0,
        failed: 1,
        conflicts: 0,
        noId: 0,
        failOpen: 0,
        releaseFailures: 0,
        claimsLost: 0,
        raced: 0,
        replayed: 0,
        resultsNotKept: 0,
        leaseRenewals: 0,
        leaseRenewalFailures: 0,
      },
    );
  });

  it('releases only the failed message’s claim', async () => {
    const { consumer, repository } = setup();
    const { results } = await consumer.processBatch([{ id: 'ok1' }, { id: 'bad' }, { id: 'ok2' }], (m) => {
      if (m.id === 'bad') throw new Error('nope');
    });
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'failed', 'processed'],
    );
    assert.equal(await repository.contains('bad'), false);
    assert.equal((await repository.get('ok1'))?.state, 'confirmed');
    assert.equal((await repository.get('ok2'))?.state, 'confirmed');
  });

  it('calls a batch handler once with the messages that need handling', async () => {
    const { consumer, repository } = setup();
    const calls: number[][] = [];
    const handler = {
      batch: (items: readonly { message: Msg; index: number }[]) => {
        calls.push(items.map((i) => i.index));
      },
    };
    const first = await consumer.processBatch([{ id: 'p' }, { id: 'q' }, { id: 'p' }], handler);
    assert.deepEqual(calls, [[0, 1]]);
    assert.deepEqual(
      first.results.map((r) => r.outcome),
      ['processed', 'processed', 'duplicate'],
    );
    const failing = await consumer.processBatch([{ id: 'r' }, { id: 'p' }], {
      batch: () => {
        throw new Error('all or nothing');
      },
    });
    assert.deepEqual(
      failing.results.map((r) => r.outcome),
      ['failed', 'duplicate'],
    );
    assert.equal(await repository.contains('r'), false);
  });

  it('reports another worker’s live claim as in-progress per message', async () => {
    const { consumer, repository } = setup();
    await repository.add('busy', { ttlMs: 10_000, leaseMs: 1_000, owner: 'other' });
    const { results } = await consumer.processBatch([{ id: 'busy' }, { id: 'free' }], () => 1);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['in-progress', 'processed'],
    );
  });

  it('marks after handling in lazy mode', async () => {
    const { consumer, repository } = setup({ mode: 'lazy' });
    const { results } = await consumer.processBatch([{ id: 'l1' }, { id: 'l1' }, { id: 'l2' }], () => 1);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'duplicate', 'processed'],
    );
    assert.equal((await repository.get('l1'))?.state, 'confirmed');
    const again = await consumer.processBatch([{ id: 'l2' }], () => 1);
    assert.equal(again.results[0]?.outcome, 'duplicate');
  });
});

/** A memory store whose `remove` fails, as a store that is down when a claim is released. */
function failingRelease(): IdempotentRepository {
  const repository = new MemoryRepository();
  const fail = () => Promise.reject(new Error('store down'));
  repository.remove = fail;
  (repository as { removeDirect?: unknown }).removeDirect = undefined;
  return repository;
}

describe('onStoreCall (eager)', () => {
  it('reports the release of a failed claim in eager mode, one message or a batch', async () => {
    const seen: StoreCall[] = [];
    const onStoreCall = (call: StoreCall) => seen.push(call);
    const c = new IdempotentConsumer<Msg>({ repository: new MemoryRepository(), id: 'id' });
    const fail = () => {
      throw new Error('no');
    };
    await assert.rejects(c.process({ id: 'a' }, fail, { onStoreCall }));
    assert.deepEqual(
      seen.map((s) => s.operation),
      ['lookup', 'release'],
    );
    seen.length = 0;
    await c.processBatch([{ id: 'b' }, { id: 'c' }], (m) => (m.id === 'b' ? fail() : 'ok'), { onStoreCall });
    assert.deepEqual(seen.map((s) => s.operation).sort(), ['confirm', 'lookup', 'release']);
  });

  it('reports a release the store refused with its error, and the message still fails as its handler did', async () => {
    const seen: StoreCall[] = [];
    const c = new IdempotentConsumer<Msg>({ repository: failingRelease(), id: 'id' });
    await assert.rejects(
      c.process({ id: 'a' }, () => Promise.reject(new Error('handler')), {
        onStoreCall: (s) => seen.push(s),
      }),
      /handler/,
    );
    const release = seen.find((s) => s.operation === 'release');
    assert.ok(release?.error instanceof RepositoryError, String(release?.error));
    assert.equal(c.stats.releaseFailures, 1);
    const results = await c.processBatch([{ id: 'b' }, { id: 'c' }], () => Promise.reject(new Error('x')), {
      onStoreCall: (s) => seen.push(s),
    });
    assert.deepEqual(
      results.results.map((r) => r.outcome),
      ['failed', 'failed'],
    );
    assert.equal(seen.filter((s) => s.operation === 'release' && s.error !== undefined).length, 3);
    assert.equal(c.stats.releaseFailures, 3);
  });
});
