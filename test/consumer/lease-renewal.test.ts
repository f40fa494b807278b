import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import { withLocalCache } from '../../src/repositories/local-cache.js';
import { LoggedRepository, MemoryChangelog } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { BaseRepository } from '../../src/store/base.js';
import type { IdempotentRepository } from '../../src/store/types.js';

// Issue 18: the lease is renewed while a handler runs; a renewal that fails is reported and counted, and a store
// that cannot renew at all still works, warned once.

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The process warnings with `code` emitted during the test. */
function warnings(t: TestContext, code: string): Error[] {
  const seen: Error[] = [];
  const listener = (warning: Error) => {
    if ((warning as { code?: string }).code === code) seen.push(warning);
  };
  process.on('warning', listener);
  t.after(() => process.off('warning', listener));
  return seen;
}

/** Warnings are emitted on the next tick. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/** A store written before `renew` existed: it extends BaseRepository and has no doRenew of its own. */
class StoreWithoutDoRenew extends MemoryRepository {
  protected override doRenew(key: string, owner: string, leaseMs: number, now: number): Promise<boolean> {
    return (BaseRepository.prototype as unknown as { doRenew: StoreWithoutDoRenew['doRenew'] }).doRenew.call(
      this,
      key,
      owner,
      leaseMs,
      now,
    );
  }
}

/** A store whose renewals fail while `down` (as when it does not answer). */
class FlakyRenewals extends MemoryRepository {
  down = false;
  protected override doRenew(key: string, owner: string, leaseMs: number, now: number): Promise<boolean> {
    if (this.down) return Promise.reject(new Error('connection reset by peer'));
    return super.doRenew(key, owner, leaseMs, now);
  }
}

describe('lease renewal', () => {
  const withoutDoRenew: Record<string, () => IdempotentRepository> = {
    'a BaseRepository store without doRenew': () => new StoreWithoutDoRenew(),
    'the local cache over it': () => withLocalCache(new StoreWithoutDoRenew()),
    'a logged store over it': () => new LoggedRepository(new StoreWithoutDoRenew(), new MemoryChangelog()),
  };
  for (const [name, open] of Object.entries(withoutDoRenew)) {
    it(`${name}: warned once, no renewal counted as failed, the messages still run`, async (t) => {
      const unsupported = warnings(t, 'IDEM_LEASE_RENEWAL_UNSUPPORTED');
      const failed = warnings(t, 'IDEM_LEASE_RENEWAL_FAILED');
      const repository = open();
      t.after(() => repository.close());
      const leaseMs = 150;
      const consumer = new IdempotentConsumer<{ id: string }>({
        repository,
        id: 'id',
        leaseMs,
        ttlMs: 60_000,
      });
      for (const batch of [['a', 'b', 'c'], ['d']]) {
        const { results } = await consumer.processBatch(
          batch.map((id) => ({ id })),
          () => sleep(2 * leaseMs),
        );
        assert.deepEqual(
          results.map((r) => r.outcome),
          batch.map(() => 'processed'),
        );
      }
      await settled();
      assert.equal(unsupported.length, 1, 'one warning that the store cannot renew');
      assert.match(unsupported[0]?.message ?? '', /no renew\(\)|cannot renew/);
      assert.deepEqual(
        failed.map((w) => w.message),
        [],
        'a store that cannot renew reported as failing renewals',
      );
      assert.equal(consumer.stats.leaseRenewalFailures, 0);
      assert.equal(consumer.stats.leaseRenewals, 0);
    });
  }

  it('a renewal the store fails is counted and reported; the claim lapses, is taken over, and the result says so', async (t) => {
    const failed = warnings(t, 'IDEM_LEASE_RENEWAL_FAILED');
    const repository = new FlakyRenewals();
    t.after(() => repository.close());
    const leaseMs = 300;
    const worker = () =>
      new IdempotentConsumer<{ id: string }>({ repository, id: 'id', leaseMs, ttlMs: 60_000 });
    const first = worker();
    const second = worker();
    repository.down = true;
    const slow = first.process({ id: 'x' }, async () => {
      // Every renewal fails while the store is down, so the claim lapses at its first lease end...
      await sleep(leaseMs + 150);
      // ...and another worker takes the id over and handles it.
      const other = await second.process({ id: 'x' }, () => 'second');
      assert.equal(other.outcome, 'processed', 'the second worker could not take the lapsed claim over');
      repository.down = false;
      // The store answers again: the renewals now find the claim is someone else's.
      await sleep(leaseMs);
      return 'first';
    });
    const result = await slow;
    await settled();
    assert.equal(result.outcome, 'processed');
    assert.equal(result.claimLost, true, 'the result did not report the lost claim');
    assert.equal(first.stats.claimsLost, 1);
    const reasons = failed.map((w) => w.message);
    assert.ok(
      reasons.some((m) => /"x" failed: .*connection reset by peer/.test(m)),
      `no warning for the failed renewals: ${JSON.stringify(reasons)}`,
    );
    assert.ok(
      reasons.some((m) => /no longer this worker’s/.test(m)),
      `no warning for the renewal of a claim taken over: ${JSON.stringify(reasons)}`,
    );
    assert.equal(first.stats.leaseRenewalFailures, failed.length, 'each failure counted and reported');
    assert.ok(first.stats.leaseRenewalFailures >= 2);
  });
  it('overlapping calls that finish out of order: the ones still running keep their claims, the others stop', async (t) => {
    // The renewer keeps running calls in an array and moves the last into a finished call's place: the call
    // moved must go on being renewed, and be untracked when it finishes (no renewal of a confirmed record).
    const failed = warnings(t, 'IDEM_LEASE_RENEWAL_FAILED');
    const repository = new MemoryRepository();
    t.after(() => repository.close());
    const leaseMs = 300;
    const worker = () =>
      new IdempotentConsumer<{ id: string }>({ repository, id: 'id', leaseMs, ttlMs: 60_000 });
    const first = worker();
    const second = worker();
    const gates = new Map<string, () => void>();
    const running = ['a', 'b', 'c'].map((id) =>
      first.process({ id }, () => new Promise<string>((resolve) => gates.set(id, () => resolve(id)))),
    );
    // The first call tracked finishes first: the last one tracked ('c') takes its place.
    gates.get('a')?.();
    assert.equal((await running[0])?.outcome, 'processed');
    await sleep(leaseMs * 3);
    for (const id of ['b', 'c']) {
      await assert.rejects(
        second.process({ id }, () => 'second'),
        (error: Error) => error.name === 'InProgressError',
        `the claim of ${id} lapsed while its handler ran`,
      );
    }
    assert.ok(first.stats.leaseRenewals >= 2, `renewals counted: ${first.stats.leaseRenewals}`);
    gates.get('c')?.();
    gates.get('b')?.();
    const [, b, c] = await Promise.all(running);
    assert.equal(b?.claimLost, undefined);
    assert.equal(c?.claimLost, undefined);
    // Nothing is tracked any more: no renewal reaches the confirmed records and fails.
    const renewals = first.stats.leaseRenewals;
    await sleep(leaseMs);
    await settled();
    assert.equal(first.stats.leaseRenewals, renewals, 'a finished call was still renewed');
    assert.deepEqual(
      failed.map((w) => w.message),
      [],
    );
    assert.equal(first.stats.leaseRenewalFailures, 0);
    assert.equal((await repository.get('c'))?.state, 'confirmed');
  });
});
