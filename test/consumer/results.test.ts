import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { deserializeValue, serializeValue } from '../../src/consumer/stored-outcome.js';
import { ConfigError, StoredFailureError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { modes, testStores } from './real-stores.js';

interface Msg {
  id: string;
  n?: number;
}

/** A value with everything plain JSON loses or mangles. */
function awkwardValue() {
  return {
    text: 'nul \u0000, sep \u0001\u0002, astral 😀𝄞, 日本語',
    bytes: new Uint8Array([0, 1, 2, 255]),
    buffer: Buffer.from([0xde, 0xad, 0xbe, 0xef]),
    missing: undefined,
    big: 12345678901234567890n,
    list: [1, undefined, null, 'x'],
    nested: { deep: { ok: true } },
  };
}

describe('default result serializer', () => {
  it('round-trips undefined, bigint, Uint8Array and Buffer (as a Buffer)', () => {
    const value = awkwardValue();
    const back = deserializeValue(serializeValue(value)) as ReturnType<typeof awkwardValue>;
    assert.deepEqual(back, value);
    assert.ok(Buffer.isBuffer(back.buffer));
    assert.ok(!Buffer.isBuffer(back.bytes) && back.bytes instanceof Uint8Array);
    assert.equal(deserializeValue(serializeValue(undefined)), undefined);
    assert.ok('missing' in back, 'an undefined property is kept');
  });
});

describe('storeResult: a duplicate gets the first result back', () => {
  for (const store of testStores) {
    for (const mode of modes) {
      it(`${store.name}, ${mode}: replays the value through wrap and processBatch without running the handler`, {
        skip: store.skip,
      }, async (t) => {
        const repository = await store.open(t);
        const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', mode, storeResult: true });
        let runs = 0;
        const handler = () => {
          runs++;
          return awkwardValue();
        };
        const first = await consumer.process({ id: 'a' }, handler);
        assert.equal(first.outcome, 'processed');
        assert.equal(first.resultKept, true);

        const dup = await consumer.process({ id: 'a' }, handler);
        assert.equal(dup.outcome, 'duplicate');
        assert.equal(dup.replayed, true);
        assert.deepEqual(dup.result, awkwardValue());
        assert.equal(runs, 1);

        // A batch: a stored duplicate, a new id, and a repeat of it in the same batch.
        const { results } = await consumer.processBatch(
          [{ id: 'a' }, { id: 'b', n: 2 }, { id: 'b' }],
          (m) => {
            runs++;
            return { n: m.n };
          },
        );
        assert.deepEqual(
          results.map((r) => [r.outcome, r.replayed, r.result]),
          [
            ['duplicate', true, awkwardValue()],
            ['processed', undefined, { n: 2 }],
            ['duplicate', true, { n: 2 }],
          ],
        );
        assert.equal(runs, 2);
        assert.deepEqual((await consumer.process({ id: 'b' }, handler)).result, { n: 2 });
        assert.equal(consumer.stats.replayed, 4);
      });
    }
  }

  it('a value over the cap is not kept: handled once, resultKept false, duplicate not replayed', async () => {
    const repository = new MemoryRepository();
    const consumer = new IdempotentConsumer<Msg>({
      repository,
      id: 'id',
      storeResult: { maxBytes: 64 },
    });
    let runs = 0;
    const big = () => {
      runs++;
      return 'x'.repeat(200);
    };
    const first = await consumer.process({ id: 'big' }, big);
    assert.equal(first.outcome, 'processed');
    assert.equal(first.result, 'x'.repeat(200));
    assert.equal(first.resultKept, false);
    assert.equal((await repository.get('big'))?.state, 'confirmed', 'the id is still recorded');
    const dup = await consumer.process({ id: 'big' }, big);
    assert.equal(dup.outcome, 'duplicate');
    assert.equal(dup.replayed, false);
    assert.equal(dup.result, undefined);
    assert.equal(runs, 1);
    assert.equal(consumer.stats.resultsNotKept, 1);
    assert.equal(consumer.stats.replayed, 0);
  });

  it('the cap counts UTF-8 bytes, not characters', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new MemoryRepository(),
      id: 'id',
      storeResult: { maxBytes: 64 },
    });
    // 35 UTF-16 units stored ('v' + JSON quotes + 16 emoji), but 67 UTF-8 bytes: over the cap.
    const first = await consumer.process({ id: 'u' }, () => '😀'.repeat(16));
    assert.equal(first.resultKept, false);
    // 15 emoji: 63 bytes, kept.
    assert.equal((await consumer.process({ id: 'u2' }, () => '😀'.repeat(15))).resultKept, true);
  });

  it('a value the serializer refuses is not kept, and the message still succeeds', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new MemoryRepository(),
      id: 'id',
      storeResult: true,
    });
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const first = await consumer.process({ id: 'c' }, () => circular);
    assert.equal(first.outcome, 'processed');
    assert.equal(first.resultKept, false);
    const dup = await consumer.process({ id: 'c' }, () => 'again');
    assert.deepEqual([dup.outcome, dup.replayed, dup.result], ['duplicate', false, undefined]);
  });

  it('takes a custom serializer and deserializer', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new MemoryRepository(),
      id: 'id',
      storeResult: {
        serialize: (value) => `date:${(value as Date).toISOString()}`,
        deserialize: (text) => new Date(text.slice('date:'.length)),
      },
    });
    const when = new Date('2026-01-02T03:04:05.678Z');
    await consumer.process({ id: 'd' }, () => when);
    const dup = await consumer.process({ id: 'd' }, () => new Date());
    assert.ok(dup.result instanceof Date);
    assert.equal((dup.result as Date).getTime(), when.getTime());
  });

  it('a record kept without a result (before storeResult) is a plain duplicate with replayed false', async () => {
    const repository = new MemoryRepository();
    await repository.add('old', { ttlMs: 60_000 });
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', storeResult: true });
    const dup = await consumer.process({ id: 'old' }, () => 'never');
    assert.deepEqual([dup.outcome, dup.replayed, dup.result], ['duplicate', false, undefined]);
  });

  it('without storeResult nothing is kept and results look as before', async () => {
    const repository = new MemoryRepository();
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id' });
    assert.deepEqual(await consumer.process({ id: 'p' }, () => 1), {
      outcome: 'processed',
      id: 'p',
      result: 1,
    });
    assert.equal((await repository.get('p'))?.result, undefined);
    const dup = await consumer.process({ id: 'p' }, () => 2);
    assert.equal(dup.replayed, undefined);
    assert.equal(dup.result, undefined);
  });
});

describe('removeOnFailure: false keeps the failure', () => {
  for (const store of testStores) {
    for (const mode of modes) {
      it(`${store.name}, ${mode}: a duplicate gets the same failure, and the handler runs once`, {
        skip: store.skip,
      }, async (t) => {
        const repository = await store.open(t);
        const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', mode, removeOnFailure: false });
        let runs = 0;
        const handler = () => {
          runs++;
          throw new RangeError('card declined: limit 😀');
        };
        await assert.rejects(consumer.process({ id: 'f' }, handler), RangeError);
        const record = await repository.get('f');
        assert.equal(record?.state, 'confirmed', 'the failure is recorded, not left as a lapsing claim');
        await assert.rejects(consumer.process({ id: 'f' }, handler), (error: unknown) => {
          assert.ok(error instanceof StoredFailureError);
          assert.equal(error.name, 'RangeError');
          assert.equal(error.storedName, 'RangeError');
          assert.equal(error.message, 'card declined: limit 😀');
          assert.equal(error.code, 'IDEM_ERR_STORED_FAILURE');
          return true;
        });
        const { results } = await consumer.processBatch([{ id: 'f' }, { id: 'g' }, { id: 'g' }], (m) => {
          runs++;
          if (m.id === 'g') throw new TypeError('bad g');
        });
        assert.deepEqual(
          results.map((r) => [r.outcome, r.replayed, (r.error as Error | undefined)?.name]),
          [
            ['failed', true, 'RangeError'],
            ['failed', undefined, 'TypeError'],
            ['failed', true, 'TypeError'],
          ],
        );
        assert.equal(runs, 2);
        assert.equal(consumer.stats.replayed, 3);
      });
    }
  }

  it('by default a failure releases the id, so a retry runs (today behaviour)', async () => {
    const repository = new MemoryRepository();
    const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', storeResult: true });
    let fail = true;
    await assert.rejects(
      consumer.process({ id: 'r' }, () => {
        if (fail) throw new Error('once');
        return 'ok';
      }),
    );
    assert.equal(await repository.contains('r'), false);
    fail = false;
    assert.equal((await consumer.process({ id: 'r' }, () => 'ok')).outcome, 'processed');
  });

  it('stores and replays failures together with values', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new MemoryRepository(),
      id: 'id',
      storeResult: true,
      removeOnFailure: false,
    });
    await consumer.process({ id: 'v' }, () => ({ ok: 1 }));
    await assert.rejects(consumer.process({ id: 'e' }, () => Promise.reject(new SyntaxError('nope'))));
    assert.deepEqual((await consumer.process({ id: 'v' }, () => null)).result, { ok: 1 });
    await assert.rejects(
      consumer.process({ id: 'e' }, () => null),
      { name: 'SyntaxError', message: 'nope' },
    );
  });
});

describe('storeResult options are checked like config', () => {
  it('refuses a maxBytes above what the store keeps, naming the option', () => {
    const repository = new MemoryRepository();
    assert.throws(
      () => new IdempotentConsumer<Msg>({ repository, id: 'id', storeResult: { maxBytes: 2 ** 30 } }),
      (error: unknown) =>
        error instanceof ConfigError &&
        /storeResult\.maxBytes/.test(error.message) &&
        /1048576 bytes/.test(error.message),
    );
  });

  it('refuses a malformed storeResult and storeResult with eventTime', () => {
    const repository = new MemoryRepository();
    assert.throws(
      () => new IdempotentConsumer<Msg>({ repository, id: 'id', storeResult: 'yes' as unknown as boolean }),
      /storeResult/,
    );
    assert.throws(
      () => new IdempotentConsumer<Msg>({ repository, id: 'id', storeResult: { maxBytes: -1 } }),
      /storeResult\.maxBytes.*greater than 0/,
    );
    assert.throws(
      () =>
        new IdempotentConsumer<Msg>({
          repository,
          id: 'id',
          storeResult: true,
          eventTime: { intervalMs: 1000 },
        }),
      /storeResult.*does not apply with eventTime/,
    );
  });
});
