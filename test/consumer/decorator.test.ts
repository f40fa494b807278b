import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { IdempotentConsumer, idempotent } from '../../src/consumer/index.js';
import { IdempotencyConflictError, InProgressError, StoredFailureError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { testStores } from './real-stores.js';

interface Charge {
  id: string;
  amount: number;
}

const FIXTURE = fileURLToPath(new URL('./fixtures/standard-decorator.ts', import.meta.url));
const STANDARD_TSCONFIG = fileURLToPath(
  new URL('./fixtures/tsconfig.standard-decorators.json', import.meta.url),
);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Runs the fixture class in a child process, compiled with the given tsconfig, and returns what it printed. */
function runFixture(tsconfig?: string): Record<string, unknown> {
  const env = { ...process.env };
  if (tsconfig) env.TSX_TSCONFIG_PATH = tsconfig;
  else delete env.TSX_TSCONFIG_PATH;
  const out = execFileSync(process.execPath, ['--import', 'tsx', FIXTURE], {
    cwd: ROOT,
    env,
    encoding: 'utf8',
  });
  return JSON.parse(out) as Record<string, unknown>;
}

const EXPECTED_FIXTURE = {
  first: { receipt: 'r-c1-5' },
  second: { receipt: 'r-c1-5' },
  conflict: 'IdempotencyConflictError',
  charged: 1,
};

describe('@idempotent as a TC39 standard decorator', () => {
  it('compiled with experimentalDecorators off: runs once, replays the result, throws on conflict', () => {
    const seen = runFixture(STANDARD_TSCONFIG);
    assert.equal(seen.form, 'standard', 'the fixture must go through the (method, context) form');
    assert.deepEqual(
      { ...seen, form: undefined, stats: undefined },
      { ...EXPECTED_FIXTURE, form: undefined, stats: undefined },
    );
  });

  it('called by hand with a method context, as the standard form is', async () => {
    const consumer = new IdempotentConsumer<Charge>({
      repository: new MemoryRepository(),
      id: 'id',
      storeResult: true,
    });
    let runs = 0;
    const method = async function (this: { tag: string }, charge: Charge) {
      runs++;
      return `${this.tag}:${charge.amount}`;
    };
    const context = {
      kind: 'method',
      name: 'charge',
      static: false,
      private: false,
    } as ClassMethodDecoratorContext;
    const decorated = idempotent(consumer)(method, context);
    const self = { tag: 'svc' };
    assert.equal(await decorated.call(self, { id: 'h', amount: 3 }), 'svc:3');
    assert.equal(await decorated.call(self, { id: 'h', amount: 3 }), 'svc:3');
    assert.equal(runs, 1);
    assert.throws(
      () => idempotent(consumer)(method, { kind: 'field' } as unknown as ClassMethodDecoratorContext),
      /applies to methods/,
    );
  });
});

describe('@idempotent under experimentalDecorators (this repository’s tsconfig)', () => {
  it('the same fixture compiled as a legacy decorator behaves the same', () => {
    const seen = runFixture();
    assert.match(String(seen.form), /^legacy/);
    assert.deepEqual(
      { ...seen, form: undefined, stats: undefined },
      { ...EXPECTED_FIXTURE, form: undefined, stats: undefined },
    );
  });

  for (const store of testStores) {
    it(`${store.name}: keeps \`this\`, returns the handler's value, then the stored one`, {
      skip: store.skip,
    }, async (t) => {
      const repository = await store.open(t);
      const consumer = new IdempotentConsumer<Charge>({ repository, id: 'id', storeResult: true });
      class Payments {
        charged: number[] = [];
        @idempotent(consumer)
        async charge(charge: Charge): Promise<{ total: number }> {
          this.charged.push(charge.amount);
          return { total: this.charged.length * 100 };
        }
      }
      const payments = new Payments();
      assert.deepEqual(await payments.charge({ id: 'p1', amount: 7 }), { total: 100 });
      assert.deepEqual(await payments.charge({ id: 'p1', amount: 7 }), { total: 100 });
      assert.deepEqual(payments.charged, [7]);
      assert.equal(consumer.stats.replayed, 1);
    });
  }

  it('documents every other outcome: undefined, StoredFailureError, InProgressError, conflict, no id', async () => {
    const repository = new MemoryRepository();
    const plain = new IdempotentConsumer<Charge>({ repository, id: 'id' });
    const keeping = new IdempotentConsumer<Charge>({ repository, id: 'id', removeOnFailure: false });
    const checked = new IdempotentConsumer<Charge>({ repository, id: 'id', fingerprint: ['amount'] });
    const lenient = new IdempotentConsumer<Partial<Charge>>({
      repository,
      id: 'id',
      nullId: 'forward',
      onWarning: () => {},
    });
    let runs = 0;
    class Service {
      @idempotent(plain)
      async plain(charge: Charge) {
        runs++;
        return charge.amount;
      }
      @idempotent(keeping)
      async failing(_charge: Charge): Promise<number> {
        runs++;
        throw new RangeError('declined');
      }
      @idempotent(checked)
      async checked(charge: Charge) {
        runs++;
        return charge.amount;
      }
      // The message is built from several arguments.
      @idempotent(lenient, { message: (id: string | undefined, amount: number) => ({ id, amount }) })
      async twoArgs(id: string | undefined, amount: number) {
        runs++;
        return `${id}:${amount}`;
      }
    }
    const s = new Service();
    assert.equal(await s.plain({ id: 'a', amount: 1 }), 1);
    assert.equal(await s.plain({ id: 'a', amount: 1 }), undefined, 'a duplicate without stored result');
    await assert.rejects(s.failing({ id: 'f', amount: 1 }), RangeError);
    await assert.rejects(
      s.failing({ id: 'f', amount: 1 }),
      (e) => e instanceof StoredFailureError && e.name === 'RangeError',
    );
    assert.equal(await s.checked({ id: 'c', amount: 1 }), 1);
    await assert.rejects(s.checked({ id: 'c', amount: 2 }), IdempotencyConflictError);
    await repository.add('busy', { ttlMs: 60_000, leaseMs: 60_000, owner: 'other-worker' });
    await assert.rejects(s.plain({ id: 'busy', amount: 1 }), InProgressError);
    assert.equal(await s.twoArgs('t', 2), 't:2');
    assert.equal(await s.twoArgs('t', 2), undefined);
    assert.equal(await s.twoArgs(undefined, 3), 'undefined:3', 'no id: forwarded, the method runs');
    assert.equal(runs, 5);
  });
});
