import assert from 'node:assert/strict';
import { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import { InProgressError } from '../errors.js';
import type { IdempotentRepository } from '../store/types.js';
import { type ContractSuite, LONG_TTL_MS, repoTest, SHORT_TTL_MS, sleep, uniqueId } from './context.js';

/*
 * A lease decides when another worker may take an id over. A handler that runs longer than its lease must keep
 * its claim: the consumer renews it (`renew`, owner-checked) every third of the lease while the handler runs.
 */

export function renewalTests(suite: ContractSuite): void {
  const { options } = suite;
  const test = repoTest(suite);
  test('a handler running three times its lease keeps its claim: a second worker trying the id meanwhile never runs it', async (first, ctx) => {
    // A second worker on its own connection where the store is shared; else the same store, as in one process.
    const second = options.capabilities.shared ? await ctx.open() : first;
    await first.contains(uniqueId('warm'));
    await second.contains(uniqueId('warm'));
    // A run in which a whole lease passed with no renewal landing (a stall on a loaded machine) shows nothing:
    // the claim may lapse there by design. Such a run is discarded, never counted as a pass; five fail the test.
    for (let attempt = 1; ; attempt++) {
      const verdict = await renewedRun(first, second);
      if (verdict === 'judged') return;
      assert.ok(
        attempt < 5,
        'in each of 5 runs a whole lease passed between two renewals (renewals did not land: a broken renew, or a machine too loaded to judge)',
      );
    }
  });

  /** One run of the test above, on fresh ids: `stalled` when it cannot be judged (see there). */
  async function renewedRun(
    firstStore: IdempotentRepository,
    secondStore: IdempotentRepository,
  ): Promise<'judged' | 'stalled'> {
    const leaseMs = SHORT_TTL_MS;
    // When a renewal last landed (or the handler started), and the longest gap between two such moments.
    let landed = Date.now();
    let longestGap = 0;
    const note = () => {
      const now = Date.now();
      longestGap = Math.max(longestGap, now - landed);
      landed = now;
    };
    const watched = new Proxy(firstStore, {
      get(target, name) {
        const value: unknown = Reflect.get(target, name);
        if (typeof value !== 'function') return value;
        const method = (value as (...args: unknown[]) => unknown).bind(target);
        if (name !== 'renew') return method;
        return async (...args: unknown[]) => {
          const renewed = await (method(...args) as Promise<boolean>);
          if (renewed) note();
          return renewed;
        };
      },
    });
    // Outside a transaction even on a SQL store: renewal is for claims that commit on their own (a claim in a
    // transaction is an uncommitted row that cannot lapse, and the consumer does not renew it).
    const worker = (repository: IdempotentRepository) =>
      new IdempotentConsumer<{ id: string }>({
        repository,
        id: 'id',
        leaseMs,
        ttlMs: LONG_TTL_MS,
        transaction: false,
      });
    const slowWorker = worker(watched);
    const otherWorker = worker(secondStore);
    const id = uniqueId('renewed');
    let runs = 0;
    let running = true;
    let stalled = false;
    const slow = slowWorker.process({ id }, async () => {
      runs++;
      landed = Date.now();
      await sleep(3 * leaseMs);
      // A store slowed by a loaded machine answers fewer renewals in three leases; the handler runs on until five
      // have come back (a condition, not a longer sleep), so the count below holds on any machine.
      const deadline = Date.now() + 30_000;
      while (slowWorker.stats.leaseRenewals < 5 && !stalled && Date.now() < deadline)
        await sleep(leaseMs / 6);
      running = false;
      return 'done';
    });
    let tries = 0;
    // When the last "in progress" answer came, from the slow handler's start: the count of tries depends on the
    // machine's speed, but an answer past 1.5 leases shows the claim was renewed whatever the speed.
    const start = Date.now();
    let latestInProgress = 0;
    while (running) {
      await sleep(leaseMs / 4);
      if (!running) break;
      tries++;
      const answer = await otherWorker
        .process({ id }, () => {
          runs++;
          return 'ran twice';
        })
        .catch((error: unknown) => error);
      if (!running && !(answer instanceof InProgressError)) break;
      if (!(answer instanceof InProgressError) && Math.max(longestGap, Date.now() - landed) >= leaseMs) {
        stalled = true;
        await slow.catch(() => undefined);
        return 'stalled';
      }
      assert.ok(
        answer instanceof InProgressError,
        `try ${tries}: the second worker got ${answer instanceof Error ? answer.name : JSON.stringify((answer as { outcome?: string }).outcome)}`,
      );
      if (running) latestInProgress = Date.now() - start;
    }
    assert.equal((await slow).outcome, 'processed');
    assert.ok(
      latestInProgress > 1.5 * leaseMs,
      `the second worker's last try while the handler ran came ${latestInProgress} ms in (${tries} tries), not past 1.5 leases`,
    );
    assert.equal(runs, 1, 'the message ran twice: the first claim lapsed while its handler ran');
    assert.ok(slowWorker.stats.leaseRenewals >= 5, `renewed ${slowWorker.stats.leaseRenewals} times`);
    assert.equal(slowWorker.stats.leaseRenewalFailures, 0);
    assert.equal((await otherWorker.process({ id }, () => 'again')).outcome, 'duplicate');
    return 'judged';
  }

  test('renew extends only the owner’s in-flight claim', async (repo) => {
    assert.equal(typeof repo.renew, 'function', 'the repository has no renew()');
    const renew = (id: string, owner: string) =>
      (repo.renew as NonNullable<typeof repo.renew>).call(repo, { id, owner }, { leaseMs: LONG_TTL_MS });
    const id = uniqueId('renew');
    await repo.add(id, { ttlMs: LONG_TTL_MS, leaseMs: SHORT_TTL_MS, owner: 'a' }, { fingerprint: 'fp' });
    assert.equal(await renew(id, 'b'), false, 'another owner renewed the claim');
    assert.equal(await renew(id, 'a'), true);
    await sleep(SHORT_TTL_MS + 300);
    const held = await repo.add(id, { ttlMs: LONG_TTL_MS, leaseMs: SHORT_TTL_MS, owner: 'b' });
    assert.equal(held.added, false, 'a renewed claim was taken over at its first lease end');
    assert.equal(!held.added && held.existing.owner, 'a');
    assert.equal(!held.added && held.existing.fingerprint, 'fp');
    assert.equal(await repo.confirm({ id, owner: 'a' }, { ttlMs: LONG_TTL_MS }), true);
    assert.equal(await renew(id, 'a'), false, 'a confirmed record was renewed');
    assert.equal((await repo.get(id))?.state, 'confirmed');
    assert.equal(await renew(uniqueId('absent'), 'a'), false);
  });
}
