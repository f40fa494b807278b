import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventTimeKey, IdempotentConsumer } from '../../src/consumer/index.js';
import type { Outcome } from '../../src/consumer/types.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';

// Every example of KIP-655, with exactly the outcomes the KIP lists. Each sequence runs three ways (one
// processBatch per record, the whole sequence as one batch, and `wrap`), which must agree.

interface Rec {
  readonly name: string;
  readonly key: string | null;
  readonly id?: string | null;
  readonly timestamp: number;
}

type Verdict = 'forwarded' | 'discarded';

const S = 1_000;
/** An arbitrary epoch-ms origin for the examples written with "t". */
const T = 1_600_000_000_000;

const verdict = (outcome: Outcome): Verdict => {
  if (outcome === 'duplicate') return 'discarded';
  assert.ok(outcome === 'processed' || outcome === 'no-id', `unexpected outcome ${outcome}`);
  return 'forwarded';
};

function consumer(intervalMs: number, by: 'key' | 'keyValue' = 'key') {
  const repository = new MemoryRepository();
  const c = new IdempotentConsumer<Rec>({
    repository,
    id: 'key',
    eventTime:
      by === 'key' ? { intervalMs, timestamp: 'timestamp' } : { intervalMs, by, valueId: (r) => r.id },
  });
  return { consumer: c, repository };
}

/** Runs the sequence three ways and returns the verdicts (asserting the three agree), plus the last consumer. */
async function run(records: readonly Rec[], intervalMs: number, by: 'key' | 'keyValue' = 'key') {
  const one = consumer(intervalMs, by);
  const oneByOne: Verdict[] = [];
  for (const r of records) {
    const { results } = await one.consumer.processBatch([r], () => undefined);
    oneByOne.push(verdict((results[0] ?? assert.fail()).outcome));
  }
  const batched = consumer(intervalMs, by);
  const { results } = await batched.consumer.processBatch(records, () => undefined);
  assert.deepEqual(
    results.map((r) => verdict(r.outcome)),
    oneByOne,
    'one batch disagrees with one record per batch',
  );
  const wrapped = consumer(intervalMs, by);
  const handle = wrapped.consumer.wrap(() => undefined);
  const viaWrap: Verdict[] = [];
  for (const r of records) viaWrap.push(verdict((await handle(r)).outcome));
  assert.deepEqual(viaWrap, oneByOne, 'wrap disagrees with processBatch');
  return { verdicts: oneByOne, ...one };
}

const named = (records: readonly Rec[], verdicts: readonly string[]) =>
  Object.fromEntries(records.map((r, i) => [r.name, verdicts[i]]));

describe('KIP-655 examples', () => {
  const I = 10 * S;

  for (const by of ['key', 'keyValue'] as const) {
    it(`r1 to r6 with one ${by === 'key' ? 'key' : 'key and id'}: forwarded, discarded, discarded, forwarded, late, late`, async () => {
      const r = (name: string, timestamp: number): Rec => ({ name, key: 'k', id: 'same', timestamp });
      const records = [
        r('r1', T),
        r('r2', T + I),
        r('r3', T - I),
        r('r4', T + I + 1),
        r('r5', T),
        r('r6', T),
      ];
      const { verdicts, consumer: c } = await run(records, I, by);
      assert.deepEqual(named(records, verdicts), {
        r1: 'forwarded',
        r2: 'discarded',
        r3: 'discarded',
        r4: 'forwarded',
        r5: 'forwarded',
        r6: 'forwarded',
      });
      // r5 and r6 are forwarded as late records: never kept, which is why r6 is not a duplicate of r5.
      assert.equal(c.eventTime?.stats.lateForwarded, 2);
      assert.equal(c.eventTime?.streamTime(), T + I + 1);
    });

    it(`k1/k2 (${by === 'key' ? 'keys' : 'ids'}): the late k1 is discarded, its duplicate lies in [streamTime − interval, streamTime]`, async () => {
      const rec = (name: string, k: string, timestamp: number): Rec =>
        by === 'key' ? { name, key: k, timestamp } : { name, key: 'key', id: k, timestamp };
      const first = [rec('k1', 'k1', T), rec('k2', 'k2', T + I)];
      const { consumer: c } = await run(first, I, by);
      assert.equal(c.eventTime?.streamTime(), T + I, 'currentStreamTime = t + deduplicationInterval');
      const records = [...first, rec('late k1', 'k1', T - I)];
      const { verdicts } = await run(records, I, by);
      assert.deepEqual(named(records, verdicts), {
        k1: 'forwarded',
        k2: 'forwarded',
        'late k1': 'discarded',
      });
    });
  }

  it('a1/a2/a3 with a 10 s interval: a2 at t−8s discarded without updating the store, a3 at t−11s forwarded', async () => {
    const a = (name: string, timestamp: number): Rec => ({ name, key: 'a', timestamp });
    const records = [a('a1', T), a('a2', T - 8 * S), a('a3', T - 11 * S)];
    const { verdicts, repository } = await run(records, 10 * S);
    assert.deepEqual(named(records, verdicts), { a1: 'forwarded', a2: 'discarded', a3: 'forwarded' });
    // Only a1 is kept: a2 was discarded (no store update) and a3 is late by more than the interval.
    const kept = await repository.get(eventTimeKey('default', 'a'), { now: T });
    assert.equal(kept?.eventTime, T);
  });

  it('interval bounds are inclusive: a1 @5s forwarded, a2 @5s dropped, a3 @6s forwarded', async () => {
    const a = (name: string, timestamp: number): Rec => ({ name, key: 'a', timestamp });
    const records = [a('a1', 5 * S), a('a2', 5 * S), a('a3', 6 * S)];
    const expected = { a1: 'forwarded', a2: 'dropped', a3: 'forwarded' };
    const asKip = (v: Verdict) => (v === 'discarded' ? 'dropped' : v);
    // The KIP's example holds for any interval below 1 s: 0 (equal timestamps only) and 999 ms (the widest).
    for (const interval of [0, 999]) {
      const { verdicts } = await run(records, interval);
      assert.deepEqual(named(records, verdicts.map(asKip)), expected, `interval ${interval} ms`);
    }
    // And with the interval exactly 1 s, the inclusive bound makes a3 (1 s after a1) a duplicate.
    const { verdicts } = await run(records, S);
    assert.deepEqual(named(records, verdicts.map(asKip)), { ...expected, a3: 'dropped' });
  });

  it('late events: k1@10s forwarded, k2@21s forwarded (k1@10s purged), k1@9s forwarded', async () => {
    const k = (name: string, key: string, timestamp: number): Rec => ({ name, key, timestamp });
    const records = [k('k1@10s', 'k1', 10 * S), k('k2@21s', 'k2', 21 * S), k('k1@9s', 'k1', 9 * S)];
    const { verdicts, repository, consumer: c } = await run(records, 10 * S);
    assert.deepEqual(named(records, verdicts), {
      'k1@10s': 'forwarded',
      'k2@21s': 'forwarded',
      'k1@9s': 'forwarded',
    });
    // Stream time 21 s: k1@10s is older than 21 s − 10 s, so the store no longer holds it.
    assert.equal(c.eventTime?.streamTime(), 21 * S);
    assert.equal(await repository.contains(eventTimeKey('default', 'k1'), { now: 21 * S }), false);
    assert.equal(c.eventTime?.stats.lateForwarded, 1);
  });

  it('an earlier version of the KIP: a2 at t+8s discarded, so a3 at t+11s is forwarded as if a2 never was', async () => {
    const a = (name: string, timestamp: number): Rec => ({ name, key: 'a', timestamp });
    const records = [a('a1', T), a('a2', T + 8 * S), a('a3', T + 11 * S)];
    const { verdicts } = await run(records, 10 * S);
    assert.deepEqual(named(records, verdicts), { a1: 'forwarded', a2: 'discarded', a3: 'forwarded' });
  });

  it('records with a null key, or a null id in byKeyValue, are always forwarded', async () => {
    const byKey = [
      { name: 'n1', key: null, timestamp: T },
      { name: 'n2', key: null, timestamp: T },
    ];
    assert.deepEqual((await run(byKey, I)).verdicts, ['forwarded', 'forwarded']);
    const byKeyValue = [
      { name: 'v1', key: 'k', id: null, timestamp: T },
      { name: 'v2', key: 'k', id: null, timestamp: T },
      { name: 'v3', key: null, id: 'x', timestamp: T },
      { name: 'v4', key: null, id: 'x', timestamp: T },
    ];
    assert.deepEqual((await run(byKeyValue, I, 'keyValue')).verdicts, [
      'forwarded',
      'forwarded',
      'forwarded',
      'forwarded',
    ]);
  });

  it('of two duplicates, the one received first is forwarded', async () => {
    const records: Rec[] = [
      { name: 'later event, received first', key: 'd', timestamp: T + 5 * S },
      { name: 'earlier event, received second', key: 'd', timestamp: T },
    ];
    const { verdicts } = await run(records, I);
    assert.deepEqual(verdicts, ['forwarded', 'discarded']);
  });
});
