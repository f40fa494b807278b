/**
 * Concurrent claims of the same ids from many connections never raise a unique violation (which would abort a
 * caller's transaction) and give each id to exactly one claimer: single claims, batches in different orders,
 * lazy marks, and claims inside transactions.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it, type TestContext } from 'node:test';
import { PostgresRepository } from '../../src/repositories/postgres/index.js';
import { createTestTable, testTable } from '../helpers/postgres.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;
const WORKERS = 8;

describe('postgres concurrent claims', { skip: skipUnlessEnabled('postgres') }, () => {
  const table = testTable('race');
  let drop: (() => Promise<void>) | undefined;
  before(async () => {
    drop = await createTestTable(table);
  });
  after(async () => {
    await drop?.();
  });

  /** WORKERS repositories on one namespace, each with its own pool (its own connections). */
  async function workers(t: TestContext): Promise<PostgresRepository[]> {
    const namespace = `race-${randomUUID().slice(0, 8)}`;
    const repositories = await Promise.all(
      Array.from({ length: WORKERS }, () =>
        PostgresRepository.open({ url: endpoints.postgresUrl, table, namespace, poolSize: 2 }),
      ),
    );
    t.after(() => Promise.all(repositories.map((r) => r.close())));
    return repositories;
  }

  /** How many workers took each id; every call must have resolved (no error at all). */
  function winners(results: { added: boolean }[][], ids: readonly string[]): number[] {
    return ids.map((_, i) => results.filter((batch) => batch[i]?.added === true).length);
  }

  it('the same ids claimed one by one by every worker at once: one winner each, no error', async (t) => {
    const repositories = await workers(t);
    const ids = Array.from({ length: 50 }, () => randomUUID());
    const results = await Promise.all(
      repositories.map((r, w) =>
        Promise.all(ids.map((id) => r.add(id, { ttlMs: MINUTE, leaseMs: MINUTE, owner: `w${w}` }))),
      ),
    );
    assert.deepEqual(
      winners(results, ids),
      ids.map(() => 1),
    );
    // The losers were answered with the winner's record.
    for (let i = 0; i < ids.length; i++) {
      const winner = results.findIndex((batch) => batch[i]?.added === true);
      for (const batch of results) {
        const result = batch[i];
        if (result && !result.added) assert.equal(result.existing.owner, `w${winner}`);
      }
    }
  });

  it('overlapping batches in different orders: one winner per id, no error, no deadlock', async (t) => {
    const repositories = await workers(t);
    const ids = Array.from({ length: 300 }, () => randomUUID());
    const results = await Promise.all(
      repositories.map(async (r, w) => {
        // Each worker sends the ids in its own order; answers come back in input order.
        const order = ids.map((_, i) => i).sort((x, y) => ((x * (w + 7)) % 301) - ((y * (w + 7)) % 301));
        const answers = await r.addMany(
          order.map((i) => ({ id: ids[i] as string })),
          { ttlMs: MINUTE, leaseMs: MINUTE, owner: `w${w}` },
        );
        const byId = new Array<{ added: boolean }>(ids.length);
        order.forEach((i, k) => {
          byId[i] = answers[k] as { added: boolean };
        });
        return byId;
      }),
    );
    assert.deepEqual(
      winners(results, ids),
      ids.map(() => 1),
    );
  });

  it('lazy marks and claims of the same ids inside transactions: one winner each, no error', async (t) => {
    const repositories = await workers(t);
    const ids = Array.from({ length: 40 }, () => randomUUID());
    const results = await Promise.all(
      repositories.map((r, w) =>
        w % 2 === 0
          ? r.markMany(
              ids.map((id) => ({ id })),
              { ttlMs: MINUTE },
            )
          : r.transaction(async () => {
              const claims = await r.addMany(
                ids.map((id) => ({ id })),
                { ttlMs: MINUTE, leaseMs: MINUTE, owner: `w${w}` },
              );
              return claims.map((c) => c.added);
            }),
      ),
    );
    const taken = ids.map((_, i) => results.filter((answers) => answers[i] === true).length);
    assert.deepEqual(
      taken,
      ids.map(() => 1),
    );
  });
});
