import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RepositoryError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';

const TTL = 10_000;
const LEASE = 1_000;

/** A clock the test steps by hand. */
function manualClock(start = 1_700_000_000_000) {
  let now = start;
  return { clock: () => now, step: (ms: number) => (now += ms) };
}

describe('memory repository: compact records and the direct verbs', () => {
  it('a first claim confirmed a millisecond late does not leave every later confirmed record an object', async () => {
    const { clock, step } = manualClock();
    const repo = new MemoryRepository({ clock });
    await repo.add('late', { ttlMs: TTL, leaseMs: LEASE, owner: 'o' });
    step(1); // a busy machine: the first confirm lands in the next millisecond
    assert.equal(await repo.confirm({ id: 'late', owner: 'o' }, { ttlMs: TTL }), true);
    assert.equal(typeof repo.localRecords.peek('late'), 'object');
    await repo.add('prompt', { ttlMs: TTL, leaseMs: LEASE, owner: 'o' });
    assert.equal(await repo.confirm({ id: 'prompt', owner: 'o' }, { ttlMs: TTL }), true);
    // Confirmed in the millisecond it was claimed: kept as its compact expiry, and read back as the record.
    assert.equal(typeof repo.localRecords.peek('prompt'), 'number');
    assert.deepStrictEqual(await repo.get('prompt'), {
      id: 'prompt',
      state: 'confirmed',
      expiresAt: clock() + TTL,
      firstSeenAt: clock(),
    });
  });

  it('a bare confirmed record reads back as the record it was, and expires exactly at expiresAt', async () => {
    const { clock, step } = manualClock();
    const repo = new MemoryRepository({ clock });
    const t0 = clock();
    assert.equal((await repo.add('a', { ttlMs: TTL, leaseMs: LEASE, owner: 'o' })).added, true);
    assert.equal(await repo.confirm({ id: 'a', owner: 'o' }, { ttlMs: TTL }), true);
    await repo.add('b', { ttlMs: TTL }); // a lazy mark: confirmed at once
    const bare = { state: 'confirmed', expiresAt: t0 + TTL, firstSeenAt: t0 } as const;
    assert.deepStrictEqual(await repo.get('a'), { id: 'a', ...bare });
    assert.deepStrictEqual(await repo.get('b'), { id: 'b', ...bare });
    const again = await repo.add('a', { ttlMs: TTL, leaseMs: LEASE, owner: 'p' });
    assert.deepStrictEqual(again, { added: false, existing: { id: 'a', ...bare } });
    // A claim confirmed a millisecond after it was made has another retention gap: it keeps its own first-seen
    // time (an object, not the compact form).
    await repo.add('c', { ttlMs: TTL, leaseMs: LEASE, owner: 'o' });
    step(1);
    assert.equal(await repo.confirm({ id: 'c', owner: 'o' }, { ttlMs: TTL }), true);
    assert.deepStrictEqual(await repo.get('c'), {
      id: 'c',
      state: 'confirmed',
      expiresAt: t0 + 1 + TTL,
      firstSeenAt: t0,
    });
    step(-1);
    // A confirmed record is not a claim: neither a confirm nor an owner's release touches it.
    assert.equal(await repo.confirm({ id: 'a', owner: 'o' }, { ttlMs: TTL }), false);
    assert.equal(await repo.remove('a', 'o'), false);
    step(TTL - 1);
    assert.equal(await repo.contains('a'), true);
    step(1);
    assert.equal(await repo.contains('a'), false);
    assert.equal((await repo.add('a', { ttlMs: TTL, leaseMs: LEASE, owner: 'q' })).added, true);
    assert.equal(await repo.remove('b'), true);
    assert.equal(await repo.contains('b'), false);
  });

  it('keeps fingerprints and results with a confirmed record', async () => {
    const repo = new MemoryRepository();
    await repo.add('f', { ttlMs: TTL, leaseMs: LEASE, owner: 'o' }, { fingerprint: 'fp' });
    await repo.confirm({ id: 'f', owner: 'o' }, { ttlMs: TTL, result: 'r' });
    const record = await repo.get('f');
    assert.equal(record?.state, 'confirmed');
    assert.equal(record?.fingerprint, 'fp');
    assert.equal(record?.result, 'r');
  });

  it('reads a compact record with a fingerprint or a result back as the record it was, and keeps event times', async () => {
    const { clock, step } = manualClock();
    const repo = new MemoryRepository({ clock });
    const t0 = clock();
    const claim = { ttlMs: TTL, leaseMs: LEASE, owner: 'o' };
    await repo.add('fp', claim, { fingerprint: 'x' });
    await repo.confirm({ id: 'fp', owner: 'o' }, { ttlMs: TTL });
    await repo.add('result', claim);
    await repo.confirm({ id: 'result', owner: 'o' }, { ttlMs: TTL, result: 'r' });
    await repo.add('both', { ttlMs: TTL }, { fingerprint: 'y', result: 's' }); // a mark: confirmed at once
    await repo.add('event', claim, { eventTime: t0 - 5, fingerprint: 'z' });
    await repo.confirm({ id: 'event', owner: 'o' }, { ttlMs: TTL, result: 't' });
    const times = { state: 'confirmed', expiresAt: t0 + TTL, firstSeenAt: t0 } as const;
    assert.deepStrictEqual(await repo.get('fp'), { id: 'fp', ...times, fingerprint: 'x' });
    assert.deepStrictEqual(await repo.get('result'), { id: 'result', ...times, result: 'r' });
    assert.deepStrictEqual(await repo.get('both'), { id: 'both', ...times, fingerprint: 'y', result: 's' });
    const event = { id: 'event', ...times, eventTime: t0 - 5, fingerprint: 'z', result: 't' };
    assert.deepStrictEqual(await repo.get('event'), event);
    assert.deepStrictEqual(repo.localRecords.peek('event'), event);
    // Neither a confirm nor an owner's release touches a compact record; it expires exactly at expiresAt.
    assert.equal(await repo.confirm({ id: 'both', owner: 'o' }, { ttlMs: TTL }), false);
    assert.equal(await repo.remove('both', 'o'), false);
    step(TTL - 1);
    assert.equal((await repo.add('both', claim)).added, false);
    step(1);
    assert.equal((await repo.add('both', claim)).added, true);
  });

  it('evicts the least recently used id past maxEntries; a duplicate counts as a use', async () => {
    const repo = new MemoryRepository({ maxEntries: 2 });
    await repo.add('a', { ttlMs: TTL });
    await repo.add('b', { ttlMs: TTL });
    assert.equal((await repo.add('a', { ttlMs: TTL })).added, false);
    await repo.add('c', { ttlMs: TTL });
    assert.deepEqual(await repo.containsMany(['a', 'b', 'c']), [true, false, true]);
    assert.equal(repo.size, 2);
  });

  it('a key used again and again is spared by eviction, and maxEntries bounds putRecord too', async () => {
    const repo = new MemoryRepository({ maxEntries: 3 });
    for (const id of ['hot', 'b', 'c']) await repo.add(id, { ttlMs: TTL });
    for (let i = 0; i < 1_000; i++) assert.equal((await repo.add('hot', { ttlMs: TTL })).added, false);
    await repo.add('d', { ttlMs: TTL });
    assert.deepEqual(await repo.containsMany(['hot', 'b', 'c', 'd']), [true, false, true, true]);
    repo.localRecords.put('e', 1);
    assert.equal(repo.size, 3);
    assert.deepEqual(await repo.containsMany(['hot', 'c', 'd']), [true, false, true]);
  });

  it('evicts as a second-chance LRU over many evictions, removals and a clear (a model)', async () => {
    // Eviction goes on from where the last one stopped (no fresh walk from the map's start): the order it drops
    // keys in must still be the model's, the oldest unused first, a used one moved to the recent end once.
    const max = 50;
    const repo = new MemoryRepository({ maxEntries: max });
    const order: string[] = [];
    const used = new Set<string>();
    const evict = () => {
      for (;;) {
        const oldest = order.shift() as string;
        if (!used.delete(oldest)) return;
        order.push(oldest);
      }
    };
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    let next = 0;
    for (let step = 0; step < 4_000; step++) {
      const roll = random(100);
      if (step === 2_000) {
        await repo.clear();
        order.length = 0;
        used.clear();
      } else if (roll < 60 || order.length === 0) {
        const id = `k${next++}`;
        assert.equal((await repo.add(id, { ttlMs: TTL })).added, true);
        order.push(id);
        if (order.length > max) evict();
      } else if (roll < 90) {
        const id = order[random(order.length)] as string;
        assert.equal((await repo.add(id, { ttlMs: TTL })).added, false);
        used.add(id);
      } else {
        const id = order[random(order.length)] as string;
        assert.equal(await repo.remove(id), true);
        order.splice(order.indexOf(id), 1);
        used.delete(id);
      }
    }
    const all = Array.from({ length: next }, (_, i) => `k${i}`);
    const held = new Set(order);
    assert.deepEqual(
      await repo.containsMany(all),
      all.map((id) => held.has(id)),
    );
    assert.equal(repo.size, order.length);
  });

  it('answers the direct verbs at once, as the async verbs answer', async () => {
    const repo = new MemoryRepository();
    const claim = repo.addDirect('d', { ttlMs: TTL, leaseMs: LEASE, owner: 'o' });
    assert.ok(!(claim instanceof Promise));
    assert.equal(claim.added, true);
    const held = repo.getDirect('d');
    assert.ok(!(held instanceof Promise));
    assert.equal(held?.state, 'in-flight');
    assert.equal(repo.confirmDirect({ id: 'd', owner: 'x' }, { ttlMs: TTL }), false);
    assert.equal(repo.confirmDirect({ id: 'd', owner: 'o' }, { ttlMs: TTL }), true);
    assert.equal(repo.removeDirect('d', 'o'), false);
    assert.equal(repo.removeDirect('d'), true);
    assert.equal(await repo.contains('d'), false);
    await repo.close();
    assert.throws(() => repo.addDirect('d', { ttlMs: TTL }), { name: 'RepositoryClosedError' });
  });

  it('a subclass that overrides an async verb gets its direct verb calling the override', async () => {
    class Down extends MemoryRepository {
      override async add(): Promise<never> {
        throw new RepositoryError('connection refused');
      }
    }
    const repo = new Down();
    const answer = repo.addDirect('e', { ttlMs: TTL });
    assert.ok(answer instanceof Promise);
    await assert.rejects(answer, RepositoryError);
    // The verbs it does not override still answer at once.
    assert.equal(repo.getDirect('e'), undefined);
  });
});
