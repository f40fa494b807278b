/**
 * MySqlRepository.transaction() against the real MariaDB: a claim holds its row lock until the end, a concurrent
 * claim waits for it (the row after a commit, the id after a rollback, in-progress past the lock timeout),
 * ROLLBACK leaves nothing, a lock timeout leaves the transaction usable (and rollback-only), a deadlock is a
 * retryable RepositoryError, and savepoints undo only what followed them.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createPool, type Pool, type PoolConnection } from 'mysql2/promise';
import { ConfigError, RepositoryError } from '../../src/errors.js';
import { MySqlRepository, mysqlTransaction } from '../../src/repositories/mysql/index.js';
import type { RepositoryTransaction } from '../../src/store/types.js';
import { createTestTable, testPool, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;
const CLAIM = { ttlMs: MINUTE, leaseMs: MINUTE, owner: 'first' } as const;

/** A promise and its resolver: lets a test hold a transaction open until it says so. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

describe('mysql transactions', { skip: skipUnlessEnabled('mysql') }, () => {
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

  async function open(t: TestContext, lockTimeoutMs = 5_000, namespace?: string): Promise<MySqlRepository> {
    const repository = await MySqlRepository.open({
      url: endpoints.mysqlUrl,
      table,
      namespace: namespace ?? `tx-${randomUUID().slice(0, 8)}`,
      lockTimeoutMs,
    });
    t.after(() => repository.close());
    return repository;
  }

  /** Rows holding `id` (ids are random: one namespace at most), seen from outside any transaction. */
  async function stored(id: string): Promise<number> {
    const [rows] = await pool.execute(`SELECT COUNT(*) AS n FROM \`${table}\` WHERE id = ?`, [
      Buffer.from(id),
    ]);
    return Number((rows as { n: unknown }[])[0]?.n);
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
    const result = await repository.transaction(async (tx) => {
      await repository.addMany([{ id: marked }], { ttlMs: MINUTE });
      tx.rollbackOnly();
      assert.equal(tx.rollingBack, true);
      // Rolling back takes the claim away: remove answers true without a statement.
      assert.equal(await repository.remove(marked), true);
      return 'kept';
    });
    assert.equal(result, 'kept');
    assert.equal(await stored(thrown), 0);
    assert.equal(await stored(marked), 0);
  });

  it("the handler's own writes on tx.client commit and roll back with the mark", async (t) => {
    const repository = await open(t);
    const effects = `idem_effects_${randomUUID().slice(0, 8)}`;
    await pool.query(`CREATE TABLE \`${effects}\` (message_id VARCHAR(64) NOT NULL) ENGINE = InnoDB`);
    t.after(() => pool.query(`DROP TABLE IF EXISTS \`${effects}\``));
    const [kept, undone] = [randomUUID(), randomUUID()];
    for (const [id, fail] of [
      [kept, false],
      [undone, true],
    ] as const) {
      await repository
        .transaction(async (tx) => {
          await repository.add(id, CLAIM);
          const db = mysqlTransaction({ transaction: tx.client });
          await db.execute(`INSERT INTO \`${effects}\` (message_id) VALUES (?)`, [id]);
          if (fail) throw new Error('after the effect');
          await repository.confirm({ id, owner: 'first' }, { ttlMs: MINUTE });
        })
        .catch(() => undefined);
    }
    const [rows] = await pool.query(`SELECT message_id FROM \`${effects}\``);
    assert.deepEqual(
      (rows as { message_id: string }[]).map((r) => r.message_id),
      [kept],
    );
    assert.equal(await stored(kept), 1);
    assert.equal(await stored(undone), 0);
  });

  it('a concurrent claim waits on the open transaction and gets the row after it commits', async (t) => {
    const namespace = `tx-${randomUUID().slice(0, 8)}`;
    const first = await open(t, 5_000, namespace);
    const second = await open(t, 5_000, namespace);
    const id = randomUUID();
    const claimed = gate();
    const release = gate();
    const holder = first.transaction(async () => {
      await first.add(id, CLAIM);
      claimed.open();
      await release.wait;
      await first.confirm({ id, owner: 'first' }, { ttlMs: MINUTE });
    });
    await claimed.wait;
    const started = Date.now();
    const waiting = second.transaction(() => second.add(id, { ...CLAIM, owner: 'second' }));
    await sleep(300);
    release.open();
    await holder;
    const answer = await waiting;
    assert.ok(Date.now() - started >= 250, 'the second claim did not wait for the first transaction');
    assert.equal(answer.added, false);
    assert.equal(!answer.added && answer.existing.state, 'confirmed');
  });

  it('after the holder rolls back, the waiting claim takes the id', async (t) => {
    const namespace = `tx-${randomUUID().slice(0, 8)}`;
    const first = await open(t, 5_000, namespace);
    const second = await open(t, 5_000, namespace);
    const id = randomUUID();
    const claimed = gate();
    const release = gate();
    const holder = first
      .transaction(async () => {
        await first.add(id, CLAIM);
        claimed.open();
        await release.wait;
        throw new Error('handler failed');
      })
      .catch(() => 'rolled back');
    await claimed.wait;
    const waiting = second.transaction(() => second.add(id, { ...CLAIM, owner: 'second' }));
    await sleep(200);
    release.open();
    assert.equal(await holder, 'rolled back');
    const answer = await waiting;
    assert.equal(answer.added, true);
    assert.equal(answer.added && answer.record.owner, 'second');
  });

  it('past the lock timeout a claim is answered in-progress, its transaction rollback-only and still usable', async (t) => {
    const namespace = `tx-${randomUUID().slice(0, 8)}`;
    const first = await open(t, 5_000, namespace);
    const second = await open(t, 1_000, namespace);
    const [busy, other] = [randomUUID(), randomUUID()];
    const claimed = gate();
    const release = gate();
    const holder = first.transaction(async () => {
      await first.add(busy, CLAIM);
      claimed.open();
      await release.wait;
    });
    await claimed.wait;
    let rollingBack = false;
    const started = Date.now();
    const answers = await second.transaction(async (tx) => {
      const batch = await second.addMany([{ id: busy }, { id: other }], { ...CLAIM, owner: 'second' });
      rollingBack = tx.rollingBack;
      // MySQL rolled back the statement, not the transaction: later verbs still run.
      assert.equal(await second.contains(randomUUID()), false);
      const marked = await second.markMany([{ id: randomUUID() }], { ttlMs: MINUTE });
      return { batch, marked };
    });
    const waited = Date.now() - started;
    release.open();
    await holder;
    assert.ok(waited >= 900 && waited < 4_000, `waited ${waited} ms, the lock timeout is 1 s`);
    assert.equal(rollingBack, true, 'the transaction was not made rollback-only');
    for (const answer of answers.batch) {
      assert.equal(answer.added, false);
      assert.equal(!answer.added && answer.existing.state, 'in-flight');
      assert.ok(!answer.added && (answer.existing.leaseExpiresAt ?? 0) > Date.now() - 5_000);
    }
    assert.deepEqual(answers.marked, [true]);
    // Rolled back: the other id was never claimed.
    assert.equal(await stored(other), 0);
    assert.equal((await first.get(busy))?.owner, 'first');
  });

  it('a claim outside any transaction that meets a held row is answered in-progress after the lock timeout', async (t) => {
    const namespace = `tx-${randomUUID().slice(0, 8)}`;
    const first = await open(t, 5_000, namespace);
    const second = await open(t, 1_000, namespace);
    const id = randomUUID();
    const claimed = gate();
    const release = gate();
    const holder = first.transaction(async () => {
      await first.add(id, CLAIM);
      claimed.open();
      await release.wait;
    });
    await claimed.wait;
    const answer = await second.add(id, { ...CLAIM, owner: 'second' });
    release.open();
    await holder;
    assert.equal(answer.added, false);
    assert.equal(!answer.added && answer.existing.state, 'in-flight');
  });

  it('a deadlock is a retryable RepositoryError and the transaction rolls back', async (t) => {
    const namespace = `tx-${randomUUID().slice(0, 8)}`;
    const first = await open(t, 10_000, namespace);
    const second = await open(t, 10_000, namespace);
    const [a, b] = [randomUUID(), randomUUID()];
    await first.addMany([{ id: a }, { id: b }], { ttlMs: MINUTE });
    const bothLocked = { first: gate(), second: gate() };
    // Each transaction locks one row, then wants the other's: InnoDB picks one of them as the victim.
    const run = (repository: MySqlRepository, mine: string, theirs: string, me: 'first' | 'second') =>
      repository.transaction(async () => {
        assert.equal(await repository.remove(mine), true);
        bothLocked[me].open();
        await bothLocked[me === 'first' ? 'second' : 'first'].wait;
        await repository.remove(theirs);
        return 'committed';
      });
    const outcomes = await Promise.allSettled([run(first, a, b, 'first'), run(second, b, a, 'second')]);
    const failed = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    assert.equal(failed.length, 1, JSON.stringify(outcomes.map((o) => o.status)));
    const error = failed[0]?.reason as RepositoryError;
    assert.ok(error instanceof RepositoryError, String(error));
    assert.equal(error.retryable, true);
    assert.match(error.message, /deadlock/);
  });

  it('savepoints undo only what followed them; one at a time', async (t) => {
    const repository = await open(t);
    const [before, inside, after] = [randomUUID(), randomUUID(), randomUUID()];
    await repository.transaction(async (tx: RepositoryTransaction<PoolConnection>) => {
      await repository.add(before, CLAIM);
      await tx.savepoint();
      await assert.rejects(tx.savepoint(), /already open/);
      await repository.add(inside, CLAIM);
      await tx.rollbackToSavepoint();
      await assert.rejects(tx.releaseSavepoint(), /no savepoint is open/);
      await tx.savepoint();
      await repository.add(after, CLAIM);
      await tx.releaseSavepoint();
    });
    assert.equal(await stored(before), 1);
    assert.equal(await stored(inside), 0);
    assert.equal(await stored(after), 1);
  });

  it("an optimistic savepoint counts the repository's own statements, not only the handed-out client's", async (t) => {
    // The repository sends its statements under mysql2's promise wrapper, past the watched methods: a verb run
    // after an optimistic savepoint must still make rolling back to it ask for real savepoints.
    const repository = await open(t);
    const [before, inside] = [randomUUID(), randomUUID()];
    let needsSavepoints: boolean | undefined;
    await repository.transaction(async (tx: RepositoryTransaction<PoolConnection>) => {
      await repository.add(before, CLAIM);
      await tx.savepoint({ optimistic: true });
      await repository.add(inside, CLAIM);
      await tx.rollbackToSavepoint();
      needsSavepoints = tx.needsSavepoints;
    });
    assert.equal(needsSavepoints, true);
    // The transaction rolled back whole: nothing of it stands.
    assert.equal(await stored(before), 0);
    assert.equal(await stored(inside), 0);
  });

  /** The stored row of `id`, seen from outside any transaction. */
  async function row(id: string): Promise<Record<string, unknown> | undefined> {
    const [rows] = await pool.execute(
      `SELECT state, expires_at, lease_expires_at, owner, first_seen_at FROM \`${table}\` WHERE id = ?`,
      [Buffer.from(id)],
    );
    return (rows as Record<string, unknown>[])[0];
  }

  /** Waits until the in-flight claim on `id` has lapsed on the server's clock (get answers no live record). */
  async function lapsed(repository: MySqlRepository, id: string): Promise<void> {
    while ((await repository.get(id)) !== undefined) await sleep(5);
  }

  it('a one-id claim that opens a transaction takes a lapsed row over whole and answers its time', async (t) => {
    const repository = await open(t);
    const id = randomUUID();
    assert.equal((await repository.add(id, { ttlMs: MINUTE, leaseMs: 1, owner: 'gone' })).added, true);
    await lapsed(repository, id);
    const taken = await repository.transaction(() => repository.add(id, { ttlMs: MINUTE }));
    assert.ok(taken.added);
    assert.equal(taken.record.state, 'confirmed');
    const stored = await row(id);
    assert.equal(stored?.state, 'confirmed');
    assert.equal(stored?.owner, null);
    assert.equal(stored?.lease_expires_at, null);
    // The record's times are the row's, on the server's clock.
    assert.equal(taken.record.expiresAt, Number(stored?.expires_at));
    assert.equal(taken.record.firstSeenAt, Number(stored?.first_seen_at));
    // A live row is left as it was, and answered.
    const kept = await repository.transaction(() => repository.add(id, { ttlMs: MINUTE }));
    assert.equal(kept.added, false);
    assert.equal(!kept.added && kept.existing.expiresAt, taken.record.expiresAt);
    // A new id: the row as the record says.
    const fresh = randomUUID();
    const added = await repository.transaction(() => repository.add(fresh, { ttlMs: MINUTE }));
    assert.ok(added.added);
    assert.equal(added.record.expiresAt, Number((await row(fresh))?.expires_at));
  });

  /** A repository on `borrowed`, in a namespace of its own; both closed after the test. */
  async function openOn(t: TestContext, borrowed: Pool, prefix: string): Promise<MySqlRepository> {
    t.after(() => borrowed.end());
    const repository = await MySqlRepository.open({
      pool: borrowed,
      table,
      namespace: `${prefix}-${randomUUID()}`,
    });
    t.after(() => repository.close());
    return repository;
  }

  /** Claims a new id in a transaction: taken, with the row's expiry as the record's. */
  async function claimsNew(repository: MySqlRepository): Promise<string> {
    const id = randomUUID();
    const added = await repository.transaction(() => repository.add(id, { ttlMs: MINUTE }));
    assert.ok(added.added);
    assert.equal(added.record.expiresAt, Number((await row(id))?.expires_at));
    return id;
  }

  it("a session whose OK packets no longer carry the claim's time still answers its claims (read back)", async (t) => {
    const repository = await openOn(t, testPool(1), 'untracked');
    const first = randomUUID();
    assert.ok((await repository.transaction(() => repository.add(first, { ttlMs: MINUTE }))).added);
    // The handler turns the session's state tracking off on the pool's one connection.
    await repository.transaction(async (tx) => {
      await tx.client.query("SET SESSION session_track_system_variables = ''");
    });
    const id = await claimsNew(repository);
    const again = await repository.transaction(() => repository.add(id, { ttlMs: MINUTE }));
    assert.equal(again.added, false);
  });

  it("statements mysql2's cache closed meanwhile are prepared anew (a borrowed pool that keeps one)", async (t) => {
    // Each statement text evicts the one before: the claim block the next transaction runs again is closed.
    const borrowed = createPool({ uri: endpoints.mysqlUrl, connectionLimit: 1, maxPreparedStatements: 1 });
    const repository = await openOn(t, borrowed, 'evicted');
    for (let i = 0; i < 3; i++) {
      const id = await claimsNew(repository);
      const again = await repository.transaction(() => repository.add(id, { ttlMs: MINUTE }));
      assert.equal(again.added, false);
    }
  });

  it('a borrowed connection that tracks every session variable (`*`) claims as well', async (t) => {
    const borrowed = testPool(1);
    await borrowed.query("SET SESSION session_track_system_variables = '*'");
    await claimsNew(await openOn(t, borrowed, 'all'));
  });

  it('the lock timeout of a transaction is restored on a borrowed pool', async (t) => {
    const borrowed = testPool(1);
    t.after(() => borrowed.end());
    const repository = await MySqlRepository.open({ pool: borrowed, table, namespace: 'borrowed' });
    t.after(() => repository.close());
    const [[before]] = (await borrowed.query(
      'SELECT @@SESSION.innodb_lock_wait_timeout AS s',
    )) as unknown as [{ s: number }[]];
    const inside = await repository.transaction(
      async (tx) => {
        const [rows] = await tx.client.query('SELECT @@SESSION.innodb_lock_wait_timeout AS s');
        return (rows as { s: number }[])[0]?.s;
      },
      { lockTimeoutMs: 2_500 },
    );
    const [[afterwards]] = (await borrowed.query(
      'SELECT @@SESSION.innodb_lock_wait_timeout AS s',
    )) as unknown as [{ s: number }[]];
    assert.equal(Number(inside), 3, 'lockTimeoutMs 2500 waits 3 whole seconds');
    assert.equal(Number(afterwards?.s), Number(before?.s));
  });

  it('mysqlTransaction(context) is the connection inside a transaction and a clear error outside one', async (t) => {
    const repository = await open(t);
    await repository.transaction(async (tx) => {
      assert.equal(mysqlTransaction({ transaction: tx.client }), tx.client);
      assert.equal(mysqlTransaction({ transaction: tx }), tx.client);
    });
    assert.throws(
      () => mysqlTransaction({}),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        assert.match(error.message, /not running inside a transaction/);
        return true;
      },
    );
    assert.throws(() => mysqlTransaction({ transaction: { query() {} } }), /not a mysql2 connection/);
  });

  it('a verb left running after its transaction ended refuses to run on the returned connection', async (t) => {
    const repository = await open(t);
    let late: Promise<unknown> | undefined;
    await repository.transaction(async () => {
      late = sleep(50).then(() => repository.get(randomUUID()));
    });
    await assert.rejects(late as Promise<unknown>, /already ended/);
  });
});
