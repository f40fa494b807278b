import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalJson } from '../../src/consumer/fingerprint.js';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { deserializeValue, serializeValue } from '../../src/consumer/stored-outcome.js';
import { StoredFailureError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { modes, testStores } from './real-stores.js';

// What a consumer keeps in a shared store must come back as the handler returned it, must not carry
// credentials, and the payload fingerprint must see every part of the message.

type Msg = { id: string; [field: string]: unknown };

/** Values a handler may return that hold the serializer's reserved tag, e.g. an echo of user input. */
const TAGGED: unknown[] = [
  { '\u0000t': 'buffer', v: 'aGk=' },
  { '\u0000t': 'bigint', v: '12' },
  { '\u0000t': 'undefined' },
  { echo: { '\u0000t': 'bytes', v: 'AA==' }, list: [{ '\u0000t': 'object', v: { a: 1 } }] },
  { '\u0000t': 'object', v: { '\u0000t': 'bigint', v: '1' } },
];

describe('stored results round-trip any JSON value', () => {
  it('the serializer keeps values holding its reserved tag, and members named __proto__', () => {
    for (const value of TAGGED) assert.deepEqual(deserializeValue(serializeValue(value)), value);
    const proto = JSON.parse('{"__proto__": {"admin": true}, "n": 1}') as Record<string, unknown>;
    const back = deserializeValue(serializeValue(proto)) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(back), Object.prototype);
    assert.ok(Object.hasOwn(back, '__proto__'));
    assert.deepEqual(Object.getOwnPropertyDescriptor(back, '__proto__')?.value, { admin: true });
    // The values the tag exists for still come back typed.
    const typed = deserializeValue(serializeValue({ b: Buffer.from('x'), n: 5n, u: undefined })) as {
      b: unknown;
      n: unknown;
    };
    assert.ok(Buffer.isBuffer(typed.b));
    assert.equal(typed.n, 5n);
  });

  for (const store of testStores) {
    for (const mode of modes) {
      it(`${store.name}, ${mode}: a duplicate gets the tagged value back as it was`, {
        skip: store.skip,
      }, async (t) => {
        const repository = await store.open(t);
        const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', mode, storeResult: true });
        for (const [i, value] of TAGGED.entries()) {
          await consumer.process({ id: `tag-${i}` }, () => value);
          const again = await consumer.process({ id: `tag-${i}` }, () => 'ran again');
          assert.equal(again.outcome, 'duplicate');
          assert.deepEqual(again.result, value);
        }
      });
    }
  }
});

describe('storeResult.storeIf chooses what is kept', () => {
  for (const store of testStores) {
    it(`${store.name}: a refused value is not kept, and its message is still handled once`, {
      skip: store.skip,
    }, async (t) => {
      const repository = await store.open(t);
      const consumer = new IdempotentConsumer<Msg>({
        repository,
        id: 'id',
        storeResult: { storeIf: (value) => (value as { ok: boolean }).ok },
      });
      let runs = 0;
      const first = await consumer.process({ id: 'no' }, () => {
        runs++;
        return { ok: false };
      });
      assert.equal(first.resultKept, false);
      const again = await consumer.process({ id: 'no' }, () => runs++);
      assert.deepEqual([again.outcome, again.replayed, again.result], ['duplicate', false, undefined]);
      await consumer.process({ id: 'yes' }, () => ({ ok: true }));
      assert.deepEqual((await consumer.process({ id: 'yes' }, () => runs++)).result, { ok: true });
      assert.equal(runs, 1);
      assert.equal(consumer.stats.resultsNotKept, 1);
    });
  }
});

describe('kept failures carry no credentials', () => {
  const secretError = () =>
    new Error('connect ECONNREFUSED postgres://app:pa@ss@db.internal:5432/orders (password=hunter22)');

  for (const store of testStores) {
    it(`${store.name}: removeOnFailure false keeps the message with credentials redacted`, {
      skip: store.skip,
    }, async (t) => {
      const repository = await store.open(t);
      const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', removeOnFailure: false });
      await assert.rejects(
        consumer.process({ id: 'f' }, () => {
          throw secretError();
        }),
      );
      const stored = (await repository.get('f'))?.result ?? '';
      for (const secret of ['pa@ss', 'ss@db', 'hunter22']) assert.ok(!stored.includes(secret), stored);
      await assert.rejects(
        consumer.process({ id: 'f' }, () => 'ok'),
        (error: unknown) => {
          assert.ok(error instanceof StoredFailureError);
          assert.match(error.message, /postgres:\/\/app:\[redacted\]@db\.internal:5432\/orders/);
          assert.doesNotMatch(error.message, /hunter22|pa@ss/);
          return true;
        },
      );
    });

    it(`${store.name}: failureMessage 'name' keeps only the error's name`, {
      skip: store.skip,
    }, async (t) => {
      const repository = await store.open(t);
      const consumer = new IdempotentConsumer<Msg>({
        repository,
        id: 'id',
        removeOnFailure: false,
        failureMessage: 'name',
      });
      await assert.rejects(
        consumer.process({ id: 'n' }, () => {
          throw new RangeError('customer 42 token abc');
        }),
      );
      assert.doesNotMatch((await repository.get('n'))?.result ?? '', /customer|abc/);
      await assert.rejects(
        consumer.process({ id: 'n' }, () => 'ok'),
        {
          name: 'RangeError',
          message: '',
        },
      );
    });
  }
});

describe('the consumer fingerprint sees Map and Set contents', () => {
  it('encodes their members, whatever the insertion order', () => {
    assert.notEqual(canonicalJson({ m: new Map([['a', 1]]) }), canonicalJson({ m: new Map([['a', 2]]) }));
    assert.notEqual(canonicalJson({ s: new Set([1]) }), canonicalJson({ s: new Set([2]) }));
    assert.equal(
      canonicalJson(
        new Map<unknown, unknown>([
          ['b', 2],
          ['a', 1],
        ]),
      ),
      canonicalJson(
        new Map<unknown, unknown>([
          ['a', 1],
          ['b', 2],
        ]),
      ),
    );
    assert.equal(canonicalJson(new Set([2, 1])), canonicalJson(new Set([1, 2])));
    assert.throws(() => canonicalJson({ w: new WeakMap() }), /WeakMap cannot be fingerprinted/);
  });

  for (const store of testStores) {
    it(`${store.name}: messages differing only inside a Map or a Set are a conflict`, {
      skip: store.skip,
    }, async (t) => {
      const repository = await store.open(t);
      const consumer = new IdempotentConsumer<Msg>({ repository, id: 'id', fingerprint: true });
      let runs = 0;
      const handler = () => {
        runs++;
      };
      await consumer.process({ id: 'm', items: new Map([['sku-1', 1]]) }, handler);
      const map = await consumer.process({ id: 'm', items: new Map([['sku-1', 5]]) }, handler);
      assert.equal(map.outcome, 'conflict');
      await consumer.process({ id: 's', tags: new Set(['a']) }, handler);
      assert.equal((await consumer.process({ id: 's', tags: new Set(['b']) }, handler)).outcome, 'conflict');
      assert.equal((await consumer.process({ id: 's', tags: new Set(['a']) }, handler)).outcome, 'duplicate');
      assert.equal(runs, 2);
    });
  }

  it('refuses a value it cannot read with an error naming the option', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new MemoryRepository(),
      id: 'id',
      fingerprint: true,
    });
    await assert.rejects(
      consumer.process({ id: 'w', cache: new WeakSet() }, () => 'ran'),
      /option fingerprint: cannot compute the fingerprint: a WeakSet/,
    );
  });
});
