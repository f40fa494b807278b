import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { IdempotentConsumer, type ProcessResult } from '../../src/consumer/index.js';
import { ClaimLostError, InProgressError, InvalidIdError, RepositoryError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { testStores } from './real-stores.js';

// The edges where the three former copies of the dedup decision disagreed (issue 8): every path now runs
// through one engine, and these pin the behaviour down.

interface Msg {
  id: string;
  ts?: number;
}

/** Stores on real servers (and the embedded one), each opened fresh per test and closed after it. */
const stores = testStores;

describe('one engine: wrap and processBatch answer alike', () => {
  it('lazy processBatch answers in-progress from the stored record, as wrap does', async () => {
    const repository = new MemoryRepository();
    await repository.add('busy', { ttlMs: 60_000, leaseMs: 60_000, owner: 'another-worker' });
    const lazy = new IdempotentConsumer<Msg>({ repository, id: 'id', mode: 'lazy' });
    let runs = 0;
    const { results } = await lazy.processBatch([{ id: 'busy' }, { id: 'free' }], () => runs++);
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['in-progress', 'processed'],
    );
    assert.equal(results[0]?.existing?.owner, 'another-worker');
    await assert.rejects(
      lazy.process({ id: 'busy' }, () => runs++),
      InProgressError,
    );
    assert.equal(runs, 1);
  });

  it('a confirmed record is reported as it is stored, not invented (lazy batch)', async () => {
    const repository = new MemoryRepository();
    const lazy = new IdempotentConsumer<Msg>({ repository, id: 'id', mode: 'lazy', ttlMs: 5_000 });
    await lazy.process({ id: 'x' }, () => 1);
    const stored = await repository.get('x');
    const { results } = await lazy.processBatch([{ id: 'x' }], () => 1);
    assert.equal(results[0]?.outcome, 'duplicate');
    assert.deepEqual(results[0]?.existing, stored);
  });
});

describe('one engine: claims are never stranded', () => {
  it('a throwing onDuplicate fails only its own message; every claim of the batch is settled', async () => {
    const repository = new MemoryRepository();
    const consumer = new IdempotentConsumer<Msg>({
      repository,
      id: 'id',
      onDuplicate: () => {
        throw new Error('hook failed');
      },
    });
    const ran: string[] = [];
    const { results } = await consumer.processBatch([{ id: 'a' }, { id: 'b' }, { id: 'a' }], (m) => {
      ran.push(m.id);
    });
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'processed', 'failed'],
    );
    assert.equal((results[2]?.error as Error | undefined)?.message, 'hook failed');
    assert.deepEqual(ran, ['a', 'b']);
    assert.equal((await repository.get('a'))?.state, 'confirmed');
    assert.equal((await repository.get('b'))?.state, 'confirmed');
  });

  it('a whole-batch handler can fail single items: their claims are released, the rest confirmed', async () => {
    const repository = new MemoryRepository();
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id' });
    const { results } = await consumer.processBatch([{ id: 'ok' }, { id: 'bad' }, { id: 'ok2' }], {
      batch: (items) => ({
        failed: items
          .filter((i) => i.message.id === 'bad')
          .map((i) => ({ index: i.index, error: 'refused' })),
      }),
    });
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'failed', 'processed'],
    );
    assert.equal(results[1]?.error, 'refused');
    assert.equal(await repository.get('bad'), undefined);
    assert.equal((await repository.get('ok2'))?.state, 'confirmed');
  });

  it('lazy: items a batch handler fails are left unmarked, so a redelivery handles them', async () => {
    const repository = new MemoryRepository();
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', mode: 'lazy' });
    const first = await consumer.processBatch([{ id: 'sent' }, { id: 'dead-lettered' }], {
      batch: (items) => ({ failed: [{ index: (items[1] as { index: number }).index, error: 'dlq' }] }),
    });
    assert.deepEqual(
      first.results.map((r) => r.outcome),
      ['processed', 'failed'],
    );
    const again = await consumer.processBatch([{ id: 'sent' }, { id: 'dead-lettered' }], { batch: () => {} });
    assert.deepEqual(
      again.results.map((r) => r.outcome),
      ['duplicate', 'processed'],
    );
  });

  it('a failed first copy does not swallow a later copy of the same id in the batch', async () => {
    const repository = new MemoryRepository();
    const consumer = new IdempotentConsumer<Msg & { fail?: boolean }>({ repository, id: 'id' });
    let effects = 0;
    const { results } = await consumer.processBatch([{ id: 'a', fail: true }, { id: 'a' }], (m) => {
      if (m.fail) throw new Error('transient');
      effects++;
    });
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['failed', 'processed'],
    );
    assert.equal(effects, 1);
    assert.equal((await repository.get('a'))?.state, 'confirmed');
  });
});

describe('one engine: a wrap call recycles its working state only once it has finished', () => {
  for (const mode of ['eager', 'lazy'] as const) {
    it(`${mode}: overlapping, nested and failing calls each settle their own id`, async () => {
      const repository = new MemoryRepository();
      const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', mode });
      const gates = new Map<string, () => void>();
      const seen: string[] = [];
      const handle: (m: Msg) => Promise<ProcessResult<string>> = consumer.wrap(async (m: Msg, context) => {
        seen.push(`${m.id}:${context.id}`);
        if (m.id.startsWith('slow')) await new Promise<void>((resolve) => gates.set(m.id, resolve));
        if (m.id === 'boom') throw new Error('boom');
        if (m.id === 'outer') return (await handle({ id: 'inner' })).outcome;
        return m.id;
      });
      const slow1 = handle({ id: 'slow1' }); // holds its state while later calls finish and recycle theirs
      assert.equal((await handle({ id: 'a' })).result, 'a');
      const slow2 = handle({ id: 'slow2' }); // takes the state 'a' gave back
      await assert.rejects(handle({ id: 'boom' }), /boom/);
      assert.equal((await handle({ id: 'outer' })).result, 'processed'); // a call inside a call
      assert.equal((await handle({ id: 'a' })).outcome, 'duplicate');
      gates.get('slow2')?.();
      assert.deepEqual(await slow2, { outcome: 'processed', id: 'slow2', result: 'slow2' });
      gates.get('slow1')?.();
      assert.deepEqual(await slow1, { outcome: 'processed', id: 'slow1', result: 'slow1' });
      for (const id of ['slow1', 'slow2', 'a', 'outer', 'inner']) {
        assert.equal((await repository.get(id))?.state, 'confirmed', id);
      }
      assert.equal(await repository.get('boom'), undefined);
      assert.deepEqual(seen, [
        'slow1:slow1',
        'a:a',
        'slow2:slow2',
        'boom:boom',
        'outer:outer',
        'inner:inner',
      ]);
      assert.equal(await handle({ id: 'boom' }).catch((e: Error) => e.message), 'boom'); // released: handled again
      assert.deepEqual(
        {
          processed: consumer.stats.processed,
          duplicate: consumer.stats.duplicate,
          failed: consumer.stats.failed,
        },
        { processed: 5, duplicate: 1, failed: 2 },
      );
    });
  }
});

describe('one engine: every way a wrap handler can end settles its claim', () => {
  // A batch of one continues its handler's promise without an async frame (issue 22): each ending takes its own
  // path there, and each must leave the id confirmed or released, the result and the counters right.
  for (const mode of ['eager', 'lazy'] as const) {
    it(`${mode}: sync value, sync throw, rejection, a non-native thenable, a waiting onDuplicate hook`, async () => {
      const repository = new MemoryRepository();
      const hooked: string[] = [];
      const consumer = new IdempotentConsumer<Msg>({
        repository,
        id: 'id',
        mode,
        onDuplicate: async (m) => {
          await sleep(1);
          hooked.push(m.id);
        },
      });
      const handle = consumer.wrap((m: Msg): unknown => {
        if (m.id === 'sync') return 'sync-value';
        if (m.id === 'throws') throw new Error('sync throw');
        if (m.id === 'rejects') return Promise.reject(new Error('rejection'));
        if (m.id === 'thenable-ok') {
          // biome-ignore lint/suspicious/noThenProperty: a non-native thenable is what this case is about.
          return { then: (resolve: (v: string) => void) => resolve('from thenable') };
        }
        if (m.id === 'thenable-fails') {
          // biome-ignore lint/suspicious/noThenProperty: a non-native thenable is what this case is about.
          return { then: (_: unknown, reject: (e: Error) => void) => reject(new Error('thenable failed')) };
        }
        return m.id;
      });
      assert.equal((await handle({ id: 'sync' })).result, 'sync-value');
      await assert.rejects(handle({ id: 'throws' }), /sync throw/);
      await assert.rejects(handle({ id: 'rejects' }), /rejection/);
      assert.equal((await handle({ id: 'thenable-ok' })).result, 'from thenable');
      await assert.rejects(handle({ id: 'thenable-fails' }), /thenable failed/);
      // Repeats: the hook waits, then the duplicate is answered; a failed id was released and runs again.
      assert.equal((await handle({ id: 'sync' })).outcome, 'duplicate');
      assert.equal((await handle({ id: 'thenable-ok' })).outcome, 'duplicate');
      await assert.rejects(handle({ id: 'rejects' }), /rejection/);
      assert.deepEqual(hooked, ['sync', 'thenable-ok']);
      for (const id of ['sync', 'thenable-ok'])
        assert.equal((await repository.get(id))?.state, 'confirmed', id);
      for (const id of ['throws', 'rejects', 'thenable-fails'])
        assert.equal(await repository.get(id), undefined, id);
      assert.deepEqual(
        {
          processed: consumer.stats.processed,
          duplicate: consumer.stats.duplicate,
          failed: consumer.stats.failed,
        },
        { processed: 2, duplicate: 2, failed: 4 },
      );
    });
  }

  it('a store read that fails under storeFailure: fail rejects the call and claims nothing', async () => {
    class Down extends MemoryRepository {
      override addDirect(): never {
        throw new Error('store down');
      }
      override getDirect(): never {
        throw new Error('store down');
      }
    }
    for (const mode of ['eager', 'lazy'] as const) {
      const consumer = new IdempotentConsumer<Msg>({
        repository: new Down(),
        id: 'id',
        mode,
        storeFailure: 'fail',
      });
      let ran = false;
      await assert.rejects(
        consumer.process({ id: 'x' }, () => {
          ran = true;
        }),
        (error: Error) => error instanceof RepositoryError && /store down/.test(error.message),
      );
      assert.equal(ran, false, `${mode}: the handler ran although the read failed`);
    }
  });
});

describe('one engine: a lost claim is reported', () => {
  it('confirm after another owner took over the lapsed claim: the result and the stats say so', async () => {
    let now = 1_000_000;
    const repository = new MemoryRepository({ clock: () => now });
    const slow = new IdempotentConsumer<Msg>({ repository, id: 'id', leaseMs: 1_000 });
    const other = new IdempotentConsumer<Msg>({ repository, id: 'id', leaseMs: 1_000 });
    let otherResult: string | undefined;
    const result = await slow.process({ id: 'x' }, async () => {
      now += 5_000; // the handler outlives its lease...
      otherResult = (await other.process({ id: 'x' }, () => 'second')).outcome; // ...and another worker takes over
    });
    assert.equal(otherResult, 'processed');
    assert.equal(result.outcome, 'processed');
    assert.equal(result.claimLost, true);
    assert.equal(slow.stats.claimsLost, 1);
  });

  it('lostClaim: error turns the lost claim into a ClaimLostError, from wrap and in a batch', async () => {
    let now = 1_000_000;
    const repository = new MemoryRepository({ clock: () => now });
    const strict = new IdempotentConsumer<Msg>({ repository, id: 'id', leaseMs: 1_000, lostClaim: 'error' });
    const other = new IdempotentConsumer<Msg>({ repository, id: 'id', leaseMs: 1_000 });
    const slowHandler = async (m: Msg) => {
      now += 5_000;
      await other.process(m, () => 'second');
    };
    await assert.rejects(
      strict.process({ id: 'x' }, slowHandler),
      (e) => e instanceof ClaimLostError && e.id === 'x',
    );
    const { results } = await strict.processBatch([{ id: 'y' }], slowHandler);
    assert.equal(results[0]?.outcome, 'failed');
    assert.ok(results[0]?.error instanceof ClaimLostError);
    assert.equal(strict.stats.claimsLost, 2);
  });

  for (const store of stores) {
    it(`${store.name}: a handler that outlives its lease, with no other owner, is still recorded (one side effect)`, {
      skip: store.skip,
    }, async (t) => {
      const repository = await store.open(t);
      const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', leaseMs: 200, ttlMs: 60_000 });
      let effects = 0;
      const first = await consumer.process({ id: 'slow' }, async () => {
        await sleep(400);
        effects++;
      });
      assert.equal(first.outcome, 'processed');
      assert.notEqual(first.claimLost, true);
      const redelivered = await consumer.process({ id: 'slow' }, () => effects++);
      assert.equal(redelivered.outcome, 'duplicate');
      assert.equal(effects, 1);
    });
  }
});

describe('one engine: the store-failure policy counts once per message', () => {
  class WriteDown extends MemoryRepository {
    override async addMany(): Promise<never> {
      throw new RepositoryError('write refused');
    }
    override async add(): Promise<never> {
      throw new RepositoryError('write refused');
    }
    override async markMany(): Promise<never> {
      throw new RepositoryError('write refused');
    }
  }

  it('a failed mark (write) counts each message, as a failed read does', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new WriteDown(),
      id: 'id',
      mode: 'lazy',
      storeFailure: 'process',
    });
    const { results } = await consumer.processBatch([{ id: 'a' }, { id: 'b' }], () => 1);
    assert.deepEqual(
      results.map((r) => [r.outcome, r.failOpen]),
      [
        ['processed', true],
        ['processed', true],
      ],
    );
    assert.equal(consumer.stats.failOpen, 2);
  });

  it('under fail, a failed mark rejects the batch so the caller does not acknowledge it', async () => {
    const consumer = new IdempotentConsumer<Msg>({ repository: new WriteDown(), id: 'id', mode: 'lazy' });
    await assert.rejects(
      consumer.processBatch([{ id: 'a' }], () => 1),
      RepositoryError,
    );
  });
});

describe('event-time state outlives the pauses the docs promise', () => {
  for (const store of stores) {
    it(`${store.name}: a record at the edge of the window survives a short pause`, {
      skip: store.skip,
    }, async (t) => {
      const repository = await store.open(t);
      const consumer = new IdempotentConsumer<Msg>({
        repository,
        id: 'id',
        eventTime: { intervalMs: 10_000, timestamp: 'ts' },
      });
      const T = 1_700_000_000_000;
      const handle = consumer.wrap(() => 'forwarded');
      assert.equal((await handle({ id: 'b', ts: T + 10_000 })).outcome, 'processed');
      assert.equal((await handle({ id: 'a', ts: T + 1 })).outcome, 'processed'); // kept: at the window's edge
      await sleep(60);
      // KIP-655 drops it: a@T+1 is still kept at stream time T+10s. The store must not have forgotten it.
      assert.equal((await handle({ id: 'a', ts: T + 1 })).outcome, 'duplicate');
    });
  }
});

describe('one engine: distinct ids never merge', () => {
  it('a JSON integer beyond 2^53 is refused as an id, never rounded into another id', async () => {
    const consumer = new IdempotentConsumer<{ id: number }>({ repository: new MemoryRepository(), id: 'id' });
    assert.equal((await consumer.process({ id: 2 ** 53 - 1 }, () => 1)).outcome, 'processed');
    // 9007199254740993 parses as 9007199254740992: two different source ids would share one key.
    await assert.rejects(
      consumer.process({ id: 2 ** 53 }, () => 1),
      (e) => e instanceof InvalidIdError && /2\^53/.test(e.message),
    );
  });

  it('KIP-655 mode: an empty key is a key, deduplicated like any other (only a null key is forwarded)', async () => {
    const consumer = new IdempotentConsumer<{ key: string | null; ts: number }>({
      repository: new MemoryRepository(),
      id: 'key',
      eventTime: { intervalMs: 1_000, timestamp: 'ts' },
    });
    const { results } = await consumer.processBatch(
      [
        { key: '', ts: 100 },
        { key: '', ts: 200 },
        { key: null, ts: 300 },
        { key: null, ts: 300 },
      ],
      () => 1,
    );
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'duplicate', 'no-id', 'no-id'],
    );
  });
});
