/**
 * Concurrent claims of the same ids from many connections: each id is taken exactly once, and no duplicate-key
 * error (nor a deadlock between the multi-row claims) ever reaches the caller.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { MySqlRepository } from '../../src/repositories/mysql/index.js';
import type { AddResult } from '../../src/store/types.js';
import { createTestTable, testTable } from '../helpers/mysql.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

const MINUTE = 60_000;
const WORKERS = 8;

/** The same ids in another order: a worker's claim locks them in its own order unless the store sorts them. */
function shuffled<T>(items: readonly T[]): T[] {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe('mysql concurrent claims', { skip: skipUnlessEnabled('mysql') }, () => {
  const table = testTable('race');
  let drop: (() => Promise<void>) | undefined;
  const repositories: MySqlRepository[] = [];
  before(async () => {
    drop = await createTestTable(table);
    for (let w = 0; w < WORKERS; w++) {
      // One pool (and so its own connections) per worker, as separate processes would have.
      repositories.push(
        await MySqlRepository.open({ url: endpoints.mysqlUrl, table, namespace: 'race', poolSize: 2 }),
      );
    }
  });
  after(async () => {
    await Promise.all(repositories.map((r) => r.close()));
    await drop?.();
  });

  it('batches of the same 200 ids, each worker in its own order: every id taken once', async () => {
    for (let round = 0; round < 5; round++) {
      const ids = Array.from({ length: 200 }, () => randomUUID());
      const answers = await Promise.all(
        repositories.map((repository, w) =>
          repository.addMany(
            shuffled(ids).map((id) => ({ id })),
            { ttlMs: MINUTE, leaseMs: MINUTE, owner: `w${w}` },
          ),
        ),
      );
      const winners = new Map<string, string[]>();
      for (const [w, batch] of answers.entries()) {
        for (const answer of batch) {
          const id = answer.added ? answer.record.id : answer.existing.id;
          if (answer.added) winners.set(id, [...(winners.get(id) ?? []), `w${w}`]);
          else assert.equal(answer.existing.state, 'in-flight');
        }
      }
      assert.equal(winners.size, ids.length, `round ${round}: some ids were taken by no worker`);
      for (const [id, owners] of winners)
        assert.equal(owners.length, 1, `${id} taken by ${owners.join(', ')}`);
      // The stored owner is the winner's, and every loser was told so.
      const stored = await repositories[0]?.getMany(ids);
      for (const record of stored ?? []) assert.deepEqual([record?.owner], winners.get(record?.id as string));
    }
  });

  it('single claims of one id from every worker at once: one winner, the others see its claim', async () => {
    for (let round = 0; round < 20; round++) {
      const id = randomUUID();
      const answers: AddResult[] = await Promise.all(
        repositories.map((repository, w) =>
          repository.add(id, { ttlMs: MINUTE, leaseMs: MINUTE, owner: `w${w}` }),
        ),
      );
      const won = answers.filter((a) => a.added);
      assert.equal(won.length, 1, `round ${round}: ${won.length} winners`);
      const owner = won[0]?.added ? won[0].record.owner : undefined;
      for (const answer of answers) if (!answer.added) assert.equal(answer.existing.owner, owner);
    }
  });

  it('a lapsed claim taken over by many workers at once goes to exactly one', async () => {
    const ids = Array.from({ length: 50 }, () => randomUUID());
    await repositories[0]?.addMany(
      ids.map((id) => ({ id })),
      { ttlMs: MINUTE, leaseMs: 1, owner: 'crashed' },
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    const answers = await Promise.all(
      repositories.map((repository, w) =>
        repository.addMany(
          shuffled(ids).map((id) => ({ id })),
          { ttlMs: MINUTE, leaseMs: MINUTE, owner: `w${w}` },
        ),
      ),
    );
    const taken = answers.flat().filter((a) => a.added);
    assert.equal(taken.length, ids.length);
    assert.equal(new Set(taken.map((a) => a.added && a.record.id)).size, ids.length);
  });
});
