import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { canonicalJson, digest, fingerprinter } from '../../src/consumer/fingerprint.js';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { ConfigError, IdempotencyConflictError, InvalidInputError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { modes, testStores } from './real-stores.js';

interface Order {
  id: string;
  amount?: number;
  currency?: string;
  meta?: { traceId?: string; at?: string };
}

describe('canonical JSON and digests', () => {
  it('is the same whatever the key order, at every depth', () => {
    const a = { id: 'x', amount: 5, meta: { at: 't', traceId: 'q' }, list: [{ b: 1, a: 2 }] };
    const b = { list: [{ a: 2, b: 1 }], meta: { traceId: 'q', at: 't' }, amount: 5, id: 'x' };
    assert.equal(canonicalJson(a), canonicalJson(b));
    assert.equal(
      canonicalJson(a),
      '{"amount":5,"id":"x","list":[{"a":2,"b":1}],"meta":{"at":"t","traceId":"q"}}',
    );
  });

  it('handles bytes, bigint, Date and undefined, and tells bytes from their base64 text', () => {
    assert.equal(canonicalJson({ b: Buffer.from([1, 2]) }), canonicalJson({ b: new Uint8Array([1, 2]) }));
    assert.notEqual(canonicalJson({ b: Buffer.from([1, 2]) }), canonicalJson({ b: 'AQI=' }));
    assert.equal(canonicalJson({ n: 10n }), '{"n":{"$bigint":"10"}}');
    assert.notEqual(canonicalJson({ n: 10n }), canonicalJson({ n: 10 }));
    assert.equal(canonicalJson({ d: new Date(0), u: undefined }), '{"d":"1970-01-01T00:00:00.000Z"}');
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    assert.throws(() => canonicalJson(cycle), /cycle/);
  });

  it('the digest is a SHA-256 in base64url, never the payload', () => {
    const fp = fingerprinter<Order>(true)({ id: 'x', currency: 'SECRET-CARD-4242' });
    assert.match(fp, /^[A-Za-z0-9_-]{43}$/);
    assert.ok(!fp.includes('SECRET'));
    assert.equal(fp, digest('{"currency":"SECRET-CARD-4242","id":"x"}'));
  });

  it('is stable across processes', () => {
    const message = {
      id: 'p',
      amount: 12.5,
      meta: { traceId: 't', at: '2026' },
      big: 7n,
      b: Buffer.from('hi'),
    };
    const script = `
      import { fingerprinter } from ${JSON.stringify(new URL('../../src/consumer/fingerprint.ts', import.meta.url).href)};
      process.stdout.write(fingerprinter(true)({ b: Buffer.from('hi'), big: 7n, meta: { at: '2026', traceId: 't' }, amount: 12.5, id: 'p' }));
    `;
    const other = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      encoding: 'utf8',
    });
    assert.equal(other, fingerprinter(true)(message));
  });

  it('a field list digests only those fields, in any order; a function digests its string or bytes', () => {
    const fields = fingerprinter<Order>(['amount', 'meta.at']);
    const reordered = fingerprinter<Order>(['meta.at', 'amount']);
    const m = { id: 'a', amount: 1, meta: { at: 'x', traceId: '1' } };
    assert.equal(fields(m), reordered(m));
    assert.equal(fields(m), fields({ ...m, meta: { at: 'x', traceId: '2' } }));
    assert.notEqual(fields(m), fields({ ...m, amount: 2 }));
    const bytes = fingerprinter<Order>(() => new Uint8Array([104, 105]));
    assert.equal(
      bytes(m),
      fingerprinter<Order>(() => 'hi')(m),
      'the bytes of "hi" and the string "hi" agree',
    );
  });
});

describe('fingerprint: same id, different payload is a conflict', () => {
  for (const store of testStores) {
    for (const mode of modes) {
      it(`${store.name}, ${mode}: conflict through process and processBatch, stored with the claim or mark`, {
        skip: store.skip,
      }, async (t) => {
        const repository = await store.open(t);
        const consumer = new IdempotentConsumer<Order>({ repository, id: 'id', mode, fingerprint: true });
        let runs = 0;
        const handler = () => {
          runs++;
          return 'charged';
        };
        const order = { id: 'o1', amount: 10, currency: 'EUR' };
        assert.equal((await consumer.process(order, handler)).outcome, 'processed');
        const stored = await repository.get('o1');
        assert.equal(stored?.fingerprint, digest(canonicalJson(order)));

        // Same payload, keys in another order: a duplicate.
        const same = await consumer.process({ currency: 'EUR', amount: 10, id: 'o1' }, handler);
        assert.equal(same.outcome, 'duplicate');

        const changed = await consumer.process({ ...order, amount: 11 }, handler);
        assert.equal(changed.outcome, 'conflict');
        assert.ok(changed.error instanceof IdempotencyConflictError);
        assert.equal(changed.error.id, 'o1');
        assert.equal(changed.error.expected, stored?.fingerprint);
        assert.equal(changed.error.actual, digest(canonicalJson({ ...order, amount: 11 })));
        assert.equal(changed.error.code, 'IDEM_ERR_CONFLICT');

        // In a batch: against the store, and against an earlier message of the same batch.
        const { results } = await consumer.processBatch(
          [
            { ...order, amount: 99 },
            { id: 'o2', amount: 1 },
            { id: 'o2', amount: 1 },
            { id: 'o2', amount: 2 },
          ],
          handler,
        );
        assert.deepEqual(
          results.map((r) => r.outcome),
          ['conflict', 'processed', 'duplicate', 'conflict'],
        );
        assert.ok(results[3]?.error instanceof IdempotencyConflictError);
        assert.equal(runs, 2);
        assert.equal(consumer.stats.conflicts, 3);
        assert.equal(consumer.stats.duplicate, 2);
      });
    }
  }

  it("onConflict 'error' makes process and wrap reject with IdempotencyConflictError", async () => {
    const consumer = new IdempotentConsumer<Order>({
      repository: new MemoryRepository(),
      id: 'id',
      fingerprint: ['amount', 'currency'],
      onConflict: 'error',
    });
    const handle = consumer.wrap(() => 'ok');
    await handle({ id: 'a', amount: 1, currency: 'EUR', meta: { traceId: '1' } });
    // A field outside the list may differ: still a duplicate.
    assert.equal(
      (await handle({ id: 'a', amount: 1, currency: 'EUR', meta: { traceId: '2' } })).outcome,
      'duplicate',
    );
    await assert.rejects(handle({ id: 'a', amount: 1, currency: 'USD' }), IdempotencyConflictError);
    const { results } = await consumer.processBatch([{ id: 'a', amount: 2, currency: 'EUR' }], () => 'ok');
    assert.equal(results[0]?.outcome, 'conflict');
    assert.ok(results[0]?.error instanceof IdempotencyConflictError);
  });

  it("another worker's live claim with another payload is a conflict, not in-progress", async () => {
    const repository = new MemoryRepository();
    await repository.add(
      'busy',
      { ttlMs: 60_000, leaseMs: 60_000, owner: 'other' },
      { fingerprint: 'elsewhere' },
    );
    const consumer = new IdempotentConsumer<Order>({ repository, id: 'id', fingerprint: true });
    const r = await consumer.process({ id: 'busy' }, () => 'never');
    assert.equal(r.outcome, 'conflict');
  });

  it('a record kept without a fingerprint matches any payload (records from before the option)', async () => {
    const repository = new MemoryRepository();
    await repository.add('old', { ttlMs: 60_000 });
    const consumer = new IdempotentConsumer<Order>({ repository, id: 'id', fingerprint: true });
    assert.equal((await consumer.process({ id: 'old', amount: 5 }, () => 'never')).outcome, 'duplicate');
  });

  it('a fingerprint function that fails fails only its message, naming the option', async () => {
    const consumer = new IdempotentConsumer<Order>({
      repository: new MemoryRepository(),
      id: 'id',
      fingerprint: (m) => (m.amount === undefined ? (null as unknown as string) : String(m.amount)),
    });
    const { results } = await consumer.processBatch([{ id: 'a' }, { id: 'b', amount: 1 }], () => 'ok');
    assert.equal(results[0]?.outcome, 'failed');
    assert.ok(results[0]?.error instanceof InvalidInputError);
    assert.match(String(results[0]?.error), /option fingerprint/);
    assert.equal(results[1]?.outcome, 'processed');
  });

  it('refuses a malformed fingerprint option and one combined with eventTime', () => {
    const repository = new MemoryRepository();
    for (const bad of [[], ['a..b'], 'yes', false]) {
      assert.throws(
        () => new IdempotentConsumer<Order>({ repository, id: 'id', fingerprint: bad as never }),
        (e: unknown) => e instanceof ConfigError && /fingerprint/.test(e.message),
        JSON.stringify(bad),
      );
    }
    assert.throws(
      () =>
        new IdempotentConsumer<Order>({
          repository,
          id: 'id',
          fingerprint: true,
          eventTime: { intervalMs: 1 },
        }),
      /fingerprint.*does not apply with eventTime/,
    );
    assert.throws(
      () => new IdempotentConsumer<Order>({ repository, id: 'id', onConflict: 'ignore' as never }),
      /onConflict/,
    );
  });
});
