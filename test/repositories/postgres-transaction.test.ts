/**
 * PostgresRepository.transaction() against the real server: a claim holds its row lock until the end, a
 * concurrent claim waits for it (the row after a commit, the id after a rollback, in-progress past the lock
 * timeout), ROLLBACK leaves nothing, and an aborted transaction never throws "current transaction is aborted" at
 * the consumer.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConfigError, RepositoryError } from '../../src/errors.js';
import { PostgresRepository, postgresTransaction } from '../../src/repositories/postgres/index.js';
import type { RepositoryTransaction } from '../../src/store/types.js';
import { createTestTable, testPool, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

const MINUTE = 60_000;

/** The shared server's port, from POSTGRES_URL (default 5432). */
const pgPort = () => Number(new URL(endpoints.postgresUrl).port || 5432);
const CLAIM = { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'first' } as const;

/** A promise and its resolver: lets a test hold a transaction open until it says so. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

describe('postgres transactions', { skip: skipUnlessEnabled('postgres') }, () => {
  const table = testTable('tx');
  let drop: (() => Promise<void>) | undefined;
  const pool = testPool();
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await pool.end();
    await drop?.();
  });

  async function open(t: TestContext, lockTimeoutMs = 5_000): Promise<PostgresRepository> {
    const repository = await PostgresRepository.open({
      url: endpoints.postgresUrl,
      table,
      namespace: `tx-${randomUUID().slice(0, 8)}`,
      lockTimeoutMs,
    });
    t.after(() => repository.close());
    return repository;
  }

  /** Rows holding `id` (ids are random: one namespace at most), seen from outside any transaction. */
  async function stored(id: string): Promise<number> {
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${table}" WHERE id = $1`, [id]);
    return rows[0].n as number;
  }

  it('commits the claim with the work, and answers what the work answers', async (t) => {
    const repository = await open(t);
    const id = randomUUID();
    const answer = await repository.transaction(async (tx) => {
      assert.equal((await repository.add(id, CLAIM)).added, true);
      // Inside, the claim is there; outside, nobody sees it before COMMIT.
      assert.equal((await repository.get(id))?.owner, 'first');
      assert.equal(await stored(id), 0);
      assert.equal(await repository.confirm({ id, owner: 'first' }, { ttlMs: MINUTE }), true);
      await tx.client.query('SELECT 1');
      return 'answer';
    });
    assert.equal(answer, 'answer');
    assert.equal((await repository.get(id))?.state, 'confirmed');
  });

  it('ROLLBACK leaves nothing: work that throws, and a rollback-only transaction', async (t) => {
    const repository = await open(t);
    const [thrown, marked] = [randomUUID(), randomUUID()];
    await assert.rejects(
      repository.transaction(async () => {
        await repository.add(thrown, CLAIM);
        throw new Error('handler failed');
      }),
      /handler failed/,
    );
    const answer = await repository.transaction(async (tx) => {
      await repository.markMany([{ id: marked }], { ttlMs: MINUTE });
      tx.rollbackOnly();
      assert.equal(tx.rollingBack, true);
      return 'kept';
    });
    assert.equal(answer, 'kept');
    assert.equal(await repository.contains(thrown), false);
    assert.equal(await repository.contains(marked), false);
    assert.equal(await stored(thrown), 0);
    assert.equal(await stored(marked), 0);
  });

  it('a concurrent claim waits on the open transaction: the row after COMMIT, the id after ROLLBACK', async (t) => {
    const repository = await open(t);
    for (const end of ['commit', 'rollback'] as const) {
      const id = randomUUID();
      const held = gate();
      const claimed = gate();
      const first = repository.transaction(async (tx) => {
        assert.equal((await repository.add(id, CLAIM)).added, true);
        claimed.open();
        await held.wait;
        if (end === 'rollback') tx.rollbackOnly();
      });
      await claimed.wait;
      let settled = false;
      // Outside any transaction: the pool's connection waits on the row lock too.
      const second = repository.add(id, { ...CLAIM, owner: 'second' }).finally(() => {
        settled = true;
      });
      await sleep(300);
      assert.equal(settled, false, `the second claim did not wait for the open transaction (${end})`);
      held.open();
      await first;
      const result = await second;
      if (end === 'commit') {
        assert.equal(result.added, false);
        assert.equal(!result.added && result.existing.owner, 'first');
      } else {
        assert.equal(result.added, true, 'the id was not free after the rollback');
      }
    }
  });

  it('past the lock timeout a claim is answered in-flight, the transaction made rollback-only, and later verbs answer without throwing', async (t) => {
    const repository = await open(t);
    const id = randomUUID();
    const other = randomUUID();
    const held = gate();
    const claimed = gate();
    const first = repository.transaction(async () => {
      await repository.add(id, CLAIM);
      claimed.open();
      await held.wait;
    });
    await claimed.wait;
    try {
      let seen: RepositoryTransaction | undefined;
      const started = Date.now();
      const answer = await repository.transaction(
        async (tx) => {
          seen = tx;
          const busy = await repository.add(id, { ...CLAIM, owner: 'second' });
          assert.equal(busy.added, false);
          assert.equal(!busy.added && busy.existing.state, 'in-flight');
          const lease = !busy.added ? (busy.existing.leaseExpiresAt ?? 0) : 0;
          assert.ok(lease > Date.now(), 'the synthesized record is not in progress');
          assert.equal(tx.rollingBack, true);
          // PostgreSQL has aborted the transaction: every later verb answers instead of throwing 25P02.
          assert.equal(await repository.get(other), undefined);
          assert.equal(await repository.contains(other), false);
          assert.deepEqual(await repository.containsMany([other, id]), [false, false]);
          assert.deepEqual(
            (await repository.addMany([{ id: other }], CLAIM)).map((r) => r.added),
            [false],
          );
          assert.deepEqual(await repository.markMany([{ id: other }], { ttlMs: MINUTE }), [false]);
          assert.equal(await repository.confirm({ id, owner: 'second' }, { ttlMs: MINUTE }), false);
          assert.equal(await repository.renew({ id, owner: 'second' }, { leaseMs: MINUTE }), false);
          assert.equal(await repository.remove(id, 'second'), true, 'remove in a rolling-back transaction');
          assert.equal(await repository.purge(), 0);
          await tx.savepoint();
          await tx.rollbackToSavepoint();
          return 'answered';
        },
        { lockTimeoutMs: 250 },
      );
      assert.equal(answer, 'answered');
      assert.ok(Date.now() - started >= 240, 'answered before the lock timeout');
      assert.equal(seen?.rollingBack, true);
    } finally {
      held.open();
      await first;
    }
    // The first transaction's claim is untouched and the busy one wrote nothing.
    assert.equal((await repository.get(id))?.owner, 'first');
    assert.equal(await repository.contains(other), false);
  });

  it('a batch claim past the lock timeout outside a transaction decides the free ids and answers the held one in-flight', async (t) => {
    const repository = await open(t, 300);
    const held = randomUUID();
    const free = [randomUUID(), randomUUID()];
    const release = gate();
    const claimed = gate();
    const first = repository.transaction(async () => {
      await repository.add(held, CLAIM);
      claimed.open();
      await release.wait;
    });
    await claimed.wait;
    try {
      const results = await repository.addMany(
        [{ id: free[0] as string }, { id: held }, { id: free[1] as string }],
        { ...CLAIM, owner: 'second' },
      );
      assert.deepEqual(
        results.map((r) => r.added),
        [true, false, true],
      );
      assert.equal(results[1]?.added === false && results[1].existing.state, 'in-flight');
    } finally {
      release.open();
      await first;
    }
  });

  it("a statement of the handler's own that fails aborts the transaction: the next verb answers and makes it rollback-only", async (t) => {
    const repository = await open(t);
    const id = randomUUID();
    let transaction: RepositoryTransaction | undefined;
    const answer = await repository.transaction(async (tx) => {
      transaction = tx;
      assert.equal((await repository.add(id, CLAIM)).added, true);
      // The handler swallows its own failure (no savepoint): PostgreSQL aborts the transaction anyway.
      await tx.client.query('SELECT 1/0').catch(() => undefined);
      assert.equal(tx.rollingBack, false);
      assert.equal(await repository.confirm({ id, owner: 'first' }, { ttlMs: MINUTE }), false);
      assert.equal(await repository.get(id), undefined);
      assert.equal(tx.rollingBack, true);
      return 'rolled back';
    });
    assert.equal(answer, 'rolled back');
    assert.equal(transaction?.rollingBack, true);
    assert.equal(await repository.contains(id), false);
  });

  it('COMMIT of a transaction aborted behind the repository is an error, not a silent rollback', async (t) => {
    const repository = await open(t);
    const id = randomUUID();
    await assert.rejects(
      repository.transaction(async (tx) => {
        await repository.add(id, CLAIM);
        await tx.client.query('SELECT 1/0').catch(() => undefined);
      }),
      /rolled back|aborted/,
    );
    assert.equal(await repository.contains(id), false);
  });

  it('savepoints undo only what follows them, including a failed statement', async (t) => {
    const repository = await open(t);
    const [kept, undone, after] = [randomUUID(), randomUUID(), randomUUID()];
    await repository.transaction(async (tx) => {
      await repository.add(kept, CLAIM);
      await tx.savepoint();
      await repository.add(undone, CLAIM);
      await tx.client.query('SELECT 1/0').catch(() => undefined);
      await tx.rollbackToSavepoint();
      // The transaction goes on after the rollback to the savepoint.
      assert.equal((await repository.add(after, CLAIM)).added, true);
      await tx.savepoint();
      await tx.releaseSavepoint();
      await assert.rejects(tx.releaseSavepoint(), /no savepoint is open/);
    });
    assert.deepEqual(await repository.containsMany([kept, undone, after]), [true, false, true]);
  });

  it('a deadlock is a retryable RepositoryError and its transaction rolls back', async (t) => {
    const repository = await open(t);
    const [a, b] = [randomUUID(), randomUUID()];
    const bothClaimed = { a: gate(), b: gate() };
    const run = (
      mine: string,
      theirs: string,
      claimed: { open: () => void },
      other: { wait: Promise<void> },
    ) =>
      repository.transaction(async () => {
        await repository.add(mine, CLAIM);
        claimed.open();
        await other.wait;
        await repository.add(theirs, { ...CLAIM, owner: 'second' });
      });
    const outcomes = await Promise.allSettled([
      run(a, b, bothClaimed.a, bothClaimed.b),
      run(b, a, bothClaimed.b, bothClaimed.a),
    ]);
    const failed = outcomes.filter((o) => o.status === 'rejected');
    assert.equal(failed.length, 1, 'exactly one transaction is the deadlock victim');
    const reason = (failed[0] as PromiseRejectedResult).reason;
    assert.ok(reason instanceof RepositoryError, String(reason));
    assert.equal(reason.retryable, true);
    assert.match(reason.message, /deadlock/);
    assert.deepEqual(await repository.containsMany([a, b]), [true, true]);
  });

  it('refuses a nested transaction and gives the handler its client through postgresTransaction', async (t) => {
    const repository = await open(t);
    await repository.transaction(async (tx) => {
      await assert.rejects(
        repository.transaction(async () => undefined),
        /already inside a transaction/,
      );
      assert.equal(postgresTransaction({ transaction: tx.client }), tx.client);
      assert.equal(postgresTransaction({ transaction: tx }), tx.client);
    });
    assert.throws(() => postgresTransaction({}), ConfigError);
    assert.throws(() => postgresTransaction({ transaction: {} }), /not a pg client/);
  });

  it("the lock timeout in force: the own pool's (no SET LOCAL), a transaction's own, a given pool's", async (t) => {
    const own = await open(t, 4_000);
    const given = await PostgresRepository.open({
      pool,
      table,
      namespace: `tx-${randomUUID().slice(0, 8)}`,
      lockTimeoutMs: 3_000,
    });
    t.after(() => given.close());
    const inForce = (repository: PostgresRepository, options?: { lockTimeoutMs: number }) =>
      repository.transaction(async (tx) => {
        await repository.add(randomUUID(), CLAIM);
        const { rows } = await tx.client.query<{ lock_timeout: string }>('SHOW lock_timeout');
        return rows[0]?.lock_timeout;
      }, options);
    // Twice each: the first claim on a connection prepares it, the next sends BEGIN in its round trip.
    for (let round = 0; round < 2; round++) {
      assert.equal(await inForce(own), '4s');
      assert.equal(await inForce(own, { lockTimeoutMs: 1_500 }), '1500ms');
      assert.equal(await inForce(given), '3s');
    }
    // SET LOCAL ends with its transaction: the connection is back at its own.
    assert.equal(await inForce(own), '4s');
  });

  it('gives every connection back: many transactions on a pool of two', async (t) => {
    const repository = await PostgresRepository.open({
      url: endpoints.postgresUrl,
      table,
      namespace: `tx-${randomUUID().slice(0, 8)}`,
      poolSize: 2,
    });
    t.after(() => repository.close());
    const ids = Array.from({ length: 20 }, () => randomUUID());
    await Promise.all(
      ids.map((id, i) =>
        repository
          .transaction(async () => {
            await repository.add(id, CLAIM);
            if (i % 3 === 0) throw new Error('fail');
          })
          .catch(() => undefined),
      ),
    );
    const held = await repository.containsMany(ids);
    assert.deepEqual(
      held,
      ids.map((_, i) => i % 3 !== 0),
    );
    assert.equal(repository.pool.totalCount <= 2, true);
    assert.equal(repository.pool.waitingCount, 0);
  });

  it('a connection reset while the work runs between statements rejects the transaction, never crashes the process', async (t) => {
    // Found by the chaos rig (test/chaos, network/postgres-tx): the checked-out client had no 'error' listener, so
    // a reset that arrived while no query ran was an unhandled 'error' event and killed the worker.
    const proxy = await TcpProxy.start({ host: new URL(endpoints.postgresUrl).hostname, port: pgPort() }, t);
    const url = new URL(endpoints.postgresUrl);
    url.host = proxy.address;
    const repository = await PostgresRepository.open({
      url: url.href,
      table,
      namespace: `tx-${randomUUID().slice(0, 8)}`,
      poolSize: 1,
    });
    t.after(() => repository.close());
    const id = randomUUID();
    await assert.rejects(
      repository.transaction(async (tx) => {
        await repository.add(id, CLAIM);
        proxy.cut();
        // The handler's own work (no statement running): the reset reaches the idle client now.
        await sleep(300);
        await (tx.client as { query(sql: string): Promise<unknown> }).query('SELECT 1');
      }),
    );
    // The broken connection was discarded: the pool serves a fresh one, and the claim was rolled back with it.
    assert.equal(await repository.contains(id), false);
    assert.equal(repository.pool.totalCount <= 1, true);
  });
});
