import assert from 'node:assert/strict';
import { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import { isTransactional } from '../store/transaction.js';
import type { AddResult, IdempotencyRecord } from '../store/types.js';
import { type ContractSuite, entriesOf, LONG_TTL_MS, repoTest, uniqueId } from './context.js';

interface Message {
  readonly id: string;
}

/*
 * A transactional store under the consumer's `transaction: 'batch'`: a failed handler undoes only its own writes,
 * however the store gets there (savepoints, or a rerun with them). The handlers write a side id per message
 * through the store's own verbs, which run on the transaction's connection.
 */
export function transactionTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  test("transaction 'batch': a handler that wrote and failed leaves none of its writes; the others commit once", async (repo) => {
    if (!isTransactional(repo)) return;
    const consumer = new IdempotentConsumer<Message>({
      repository: repo,
      id: 'id',
      ttlMs: LONG_TTL_MS,
      transaction: 'batch',
      onWarning: () => {},
    });
    const batch = entriesOf([uniqueId('a'), uniqueId('fail'), uniqueId('c'), uniqueId('refused')]);
    const side = (message: Message) => `${message.id}-side`;
    const runs = new Map<string, number>();
    const { results } = await consumer.processBatch(batch, async (message) => {
      runs.set(message.id, (runs.get(message.id) ?? 0) + 1);
      if (message.id.startsWith('refused')) throw new Error('refused before writing');
      await repo.add(side(message), { ttlMs: LONG_TTL_MS });
      if (message.id.startsWith('fail')) throw new Error('failed after writing');
    });
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['processed', 'failed', 'processed', 'failed'],
    );
    assert.match(String(results[1]?.error), /failed after writing/);
    assert.match(String(results[3]?.error), /refused before writing/);
    for (const [i, present] of [true, false, true, false].entries()) {
      const message = batch[i] as Message;
      assert.equal(await repo.contains(message.id), present, `the mark of ${message.id}`);
      assert.equal(await repo.contains(side(message)), present, `the write of ${message.id}'s handler`);
    }
    // Whether the store reran the batch or not, each handler that wrote ran at least once, and the one that
    // failed after the last write ran once.
    assert.equal(runs.get((batch[3] as Message).id), 1);
    const again = await consumer.processBatch(batch.slice(0, 3), async () => {});
    assert.deepEqual(
      again.results.map((r) => r.outcome),
      ['duplicate', 'processed', 'duplicate'],
    );
  });

  // A store may send a claim of several ids in a transaction another way (MariaDB: what the rows share once, with
  // the transaction's start): the same records either way, each with its own fields.
  test('a claim and a lazy mark of several ids store the same records in a transaction as outside one', async (repo) => {
    if (!isTransactional(repo)) return;
    const entries = (tag: string) =>
      [
        { id: uniqueId(`${tag}-a`), fingerprint: 'fp-a', eventTime: 1_000 },
        { id: uniqueId(`${tag}-b`), result: 'r-b' },
        { id: uniqueId(`${tag}-c`), fingerprint: 'fp-c' },
      ] as const;
    const claim = { ttlMs: LONG_TTL_MS, leaseMs: LONG_TTL_MS / 2, owner: 'contract-owner' };
    const mark = { ttlMs: LONG_TTL_MS / 4 };
    /** A stored record without its id and its times, which only count from when it was first seen. */
    const shape = (record: IdempotencyRecord | undefined) => {
      assert.ok(record !== undefined);
      const { id: _id, firstSeenAt = 0, expiresAt, leaseExpiresAt, ...rest } = record;
      return {
        ...rest,
        expiresIn: expiresAt - firstSeenAt,
        leaseIn: (leaseExpiresAt ?? firstSeenAt) - firstSeenAt,
      };
    };
    for (const options of [claim, mark]) {
      const inside = entries('inside');
      const outside = entries('outside');
      const answers: AddResult[] = await repo.transaction(() => repo.addMany(inside, options));
      assert.deepEqual(
        answers.map((a) => a.added),
        [true, true, true],
      );
      await repo.addMany(outside, options);
      const stored = await repo.getMany(inside.map((e) => e.id));
      assert.deepEqual(stored.map(shape), (await repo.getMany(outside.map((e) => e.id))).map(shape));
      assert.deepEqual(
        answers.map((a) => (a.added ? shape(a.record) : undefined)),
        stored.map(shape),
      );
    }
  });
}
