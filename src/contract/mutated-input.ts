import assert from 'node:assert/strict';
import { fingerprinter } from '../consumer/fingerprint.js';
import type { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import type { BatchItem } from '../consumer/types.js';
import type { IdempotentRepository } from '../store/types.js';
import { consumerRuns, storingConsumer } from './consumer-runs.js';
import { type ContractSuite, repoTest, uniqueId } from './context.js';

/*
 * A handler may change the message it was given (its id field, its payload). The consumer reads the id and the
 * fingerprint once, before the handler runs, so it completes (or releases) the id it claimed, with the original's
 * fingerprint; reading the id again after would leave the claimed one in flight (Powertools TypeScript #5715).
 */

interface Message {
  id: string;
  payload: { amount: number; note?: string };
}

const original = (id: string, amount = 5): Message => ({ id, payload: { amount, note: `note ${amount}` } });

/** What the whole message fingerprints to, as the consumer computes it before the handler. */
const fingerprintOf = fingerprinter<Message>(true);

/** Rewrites the id field and the payload, answering what the original input said. */
function mutate(message: Message, newId: string): { amount: number } {
  const { amount } = message.payload;
  message.id = newId;
  delete message.payload.note;
  message.payload.amount = -amount;
  return { amount };
}

export function mutatedInputTests(suite: ContractSuite): void {
  const test = repoTest(suite);
  /** The original id is confirmed with the original's fingerprint; the id the handler wrote was never stored. */
  async function assertCompleted(repo: IdempotentRepository, id: string, rewritten: string, what: string) {
    const record = await repo.get(id);
    assert.equal(record?.state, 'confirmed', `${what}: the claimed id was not completed`);
    assert.equal(
      record.fingerprint,
      fingerprintOf(original(id)),
      `${what}: the fingerprint is not the original's`,
    );
    assert.equal(await repo.contains(rewritten), false, `${what}: the rewritten id was stored`);
  }

  /** The original again is a duplicate answered with the stored result; a changed payload is a conflict. */
  async function assertRedelivery(idempotent: IdempotentConsumer<Message>, id: string, what: string) {
    const again = await idempotent.process(original(id), () => assert.fail(`${what}: the handler ran again`));
    assert.equal(again.outcome, 'duplicate', what);
    assert.deepEqual(again.result, { amount: 5 }, `${what}: the replayed result`);
    const changed = await idempotent.process(original(id, 6), () => assert.fail(`${what}: ran a conflict`));
    assert.equal(changed.outcome, 'conflict', `${what}: a changed payload under the same id`);
  }

  test('a handler that rewrites the id and the payload completes the claimed id (wrap and process)', async (repo) => {
    for (const run of consumerRuns(repo)) {
      const idempotent = storingConsumer<Message>(repo, run);
      for (const entry of ['wrap', 'process'] as const) {
        const what = `${run.label}, ${entry}`;
        const id = uniqueId('orig');
        const rewritten = uniqueId('rewritten');
        const handler = (message: Message) => mutate(message, rewritten);
        const first =
          entry === 'wrap'
            ? await idempotent.wrap(handler)(original(id))
            : await idempotent.process(original(id), handler);
        assert.equal(first.outcome, 'processed', what);
        assert.equal(first.id, id, `${what}: the result names the original id`);
        assert.equal(first.resultKept, true, what);
        await assertCompleted(repo, id, rewritten, what);
        await assertRedelivery(idempotent, id, what);
      }
    }
  });

  test('a handler that rewrites the id and then fails releases the claimed id, so the original runs again', async (repo) => {
    for (const run of consumerRuns(repo)) {
      const idempotent = storingConsumer<Message>(repo, run);
      const id = uniqueId('orig');
      const rewritten = uniqueId('rewritten');
      await assert.rejects(
        idempotent.process(original(id), (message) => {
          mutate(message, rewritten);
          throw new Error('failed after rewriting its input');
        }),
        /failed after rewriting/,
      );
      assert.equal(await repo.contains(id), false, `${run.label}: the claimed id was left held`);
      assert.equal(await repo.contains(rewritten), false, `${run.label}: the rewritten id was stored`);
      const retry = await idempotent.process(original(id), (message) => ({
        amount: message.payload.amount,
      }));
      assert.equal(retry.outcome, 'processed', run.label);
      await assertCompleted(repo, id, rewritten, run.label);
    }
  });

  test('processBatch: handlers that rewrite ids (to another message’s, or a new one) complete each claimed id', async (repo) => {
    for (const run of consumerRuns(repo)) {
      const idempotent = storingConsumer<Message>(repo, run);
      const ids = [uniqueId('b0'), uniqueId('b1'), uniqueId('b2')];
      // The first takes the second's id, the others ids never claimed: a settle that read the ids again would
      // complete the second twice and leave the first and the third in flight.
      const rewritten = [ids[1] as string, uniqueId('new1'), uniqueId('new2')];
      const { results } = await idempotent.processBatch(
        ids.map((id) => original(id)),
        (message) => mutate(message, rewritten[ids.indexOf(message.id)] as string),
      );
      assert.deepEqual(
        results.map((r) => [r.outcome, r.id]),
        ids.map((id) => ['processed', id]),
        run.label,
      );
      for (const [i, id] of ids.entries()) {
        await assertCompleted(repo, id, i === 0 ? uniqueId('never') : (rewritten[i] as string), run.label);
      }
      for (const id of ids) await assertRedelivery(idempotent, id, `${run.label}, batch`);
    }
  });

  test('processBatch with a whole-batch handler: rewritten ids do not move a failure or a completion to another id', async (repo) => {
    for (const run of consumerRuns(repo)) {
      const idempotent = storingConsumer<Message>(repo, run);
      const ids = [uniqueId('w0'), uniqueId('w1'), uniqueId('w2')];
      const { results } = await idempotent.processBatch(
        ids.map((id) => original(id)),
        {
          batch: (items: readonly BatchItem<Message>[]) => {
            // Each message takes the next one's id; the middle one fails.
            for (const item of items) mutate(item.message, ids[(item.index + 1) % ids.length] as string);
            return { failed: [{ index: 1, error: new Error('the middle one failed') }] };
          },
        },
      );
      assert.deepEqual(
        results.map((r) => [r.outcome, r.id]),
        [
          ['processed', ids[0]],
          ['failed', ids[1]],
          ['processed', ids[2]],
        ],
        run.label,
      );
      const [first, failed, third] = (await repo.getMany(ids)).map((r) => r?.state);
      assert.deepEqual([first, failed, third], ['confirmed', undefined, 'confirmed'], run.label);
      for (const id of [ids[0], ids[2]] as string[]) {
        assert.equal((await repo.get(id))?.fingerprint, fingerprintOf(original(id)), run.label);
        const again = await idempotent.process(original(id), () => assert.fail('ran again'));
        assert.equal(again.outcome, 'duplicate', run.label);
      }
      const retry = await idempotent.process(original(ids[1] as string), () => 'second try');
      assert.equal(retry.outcome, 'processed', `${run.label}: the failed message is handled on redelivery`);
    }
  });
}
