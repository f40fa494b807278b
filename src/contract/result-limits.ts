import assert from 'node:assert/strict';
import type { ProcessResult } from '../consumer/types.js';
import type { IdempotentRepository } from '../store/types.js';
import { consumerRuns, storingConsumer } from './consumer-runs.js';
import { type ContractSuite, padded, repoTest, uniqueId } from './context.js';

/*
 * The store's declared `maxResultBytes` is a promise to the consumer's `storeResult`: a result of exactly that
 * many bytes is kept and replayed whole, beside the largest id and a fingerprint, on every write path. One byte
 * more is not kept (`resultKept: false`), and a redelivery is a plain duplicate that does not run the handler
 * again. A store whose write of an at-limit record fails (a server's size limit) has declared too much.
 */

/** A fingerprint as the consumer stores it: a SHA-256 digest in base64url. */
const FINGERPRINT_CHARS = 43;

interface Message {
  readonly id: string;
  readonly n: number;
}

/**
 * A handler value kept as exactly `bytes` UTF-8 bytes (a one-character tag, the JSON string in two quotes),
 * ending in multi-byte characters JSON leaves as they are, so a store that cut or re-encoded it would show.
 */
const valueKeptAs = (bytes: number) => padded(bytes - 3, '', '日😀', 'r');

/** A fresh id of exactly `bytes` UTF-8 bytes. */
const idOfBytes = (bytes: number) => padded(bytes, uniqueId('limit'));

/** Compares a large result without printing a megabyte diff when it differs. */
function assertSame(actual: unknown, expected: string, what: string): void {
  if (actual === expected) return;
  const length = typeof actual === 'string' ? `${Buffer.byteLength(actual, 'utf8')} bytes` : typeof actual;
  assert.fail(`${what}: got ${length}, not the ${Buffer.byteLength(expected, 'utf8')}-byte value given`);
}

export function resultLimitTests(suite: ContractSuite): void {
  const { options } = suite;
  const test = repoTest(suite);
  const { maxIdBytes } = options.capabilities;

  /** The record of a handled id: confirmed, with a fingerprint, and with `resultBytes` of result (or none). */
  async function assertRecord(repository: IdempotentRepository, id: string, resultBytes: number | undefined) {
    const record = await repository.get(id);
    assert.equal(record?.state, 'confirmed', `the record of a ${Buffer.byteLength(id)}-byte id`);
    assert.equal(record.fingerprint?.length, FINGERPRINT_CHARS, 'the fingerprint kept with it');
    const kept = record.result === undefined ? undefined : Buffer.byteLength(record.result, 'utf8');
    assert.equal(kept, resultBytes, 'bytes of result kept');
  }

  test('keeps a result of exactly maxResultBytes beside a maxIdBytes id and a fingerprint, and replays it whole', async (repo) => {
    const max = repo.capabilities.maxResultBytes;
    const atLimit = valueKeptAs(max);
    for (const run of consumerRuns(repo)) {
      const idempotent = storingConsumer<Message>(repo, run);
      const message = { id: idOfBytes(maxIdBytes), n: 1 };
      let runs = 0;
      const first = await idempotent.wrap(() => {
        runs++;
        return atLimit;
      })({ ...message });
      assert.equal(first.outcome, 'processed', run.label);
      assert.equal(first.resultKept, true, `${run.label}: resultKept`);
      await assertRecord(repo, message.id, max);
      const again = await idempotent.process({ ...message }, () => {
        runs++;
        return 'ran again';
      });
      assert.equal(again.outcome, 'duplicate', run.label);
      assert.equal(again.replayed, true, `${run.label}: replayed`);
      assertSame(again.result, atLimit, `${run.label}: the replayed result`);
      assert.equal(runs, 1, `${run.label}: the handler ran again`);
    }
  });

  test('does not keep a result one byte over maxResultBytes: resultKept false, then a plain duplicate that does not run again', async (repo) => {
    const over = valueKeptAs(repo.capabilities.maxResultBytes + 1);
    for (const run of consumerRuns(repo)) {
      const idempotent = storingConsumer<Message>(repo, run);
      const message = { id: idOfBytes(maxIdBytes), n: 2 };
      let runs = 0;
      const first = await idempotent.process({ ...message }, () => {
        runs++;
        return over;
      });
      assert.equal(first.outcome, 'processed', run.label);
      assert.equal(first.resultKept, false, `${run.label}: resultKept`);
      assertSame(first.result, over, `${run.label}: the handler's own result`);
      await assertRecord(repo, message.id, undefined);
      const again = await idempotent.wrap(() => {
        runs++;
        return 'ran again';
      })({ ...message });
      assert.equal(again.outcome, 'duplicate', run.label);
      assert.notEqual(again.replayed, true, `${run.label}: replayed a result that was not kept`);
      assert.equal(again.result, undefined, run.label);
      assert.equal(runs, 1, `${run.label}: the handler ran again`);
    }
  });

  test('in a batch of three, keeps the two results of exactly maxResultBytes and not the one a byte over', async (repo) => {
    const max = repo.capabilities.maxResultBytes;
    const atLimit = valueKeptAs(max);
    const over = valueKeptAs(max + 1);
    for (const run of consumerRuns(repo)) {
      const idempotent = storingConsumer<Message>(repo, run);
      const messages = [0, 1, 2].map((n) => ({ id: idOfBytes(maxIdBytes), n }));
      const values = [atLimit, over, atLimit];
      let runs = 0;
      const handler = (message: Message) => {
        runs++;
        return values[message.n] as string;
      };
      const copies = () => messages.map((m) => ({ ...m }));
      const { results } = await idempotent.processBatch(copies(), handler);
      assert.deepEqual(
        results.map((r) => [r.outcome, r.resultKept]),
        [
          ['processed', true],
          ['processed', false],
          ['processed', true],
        ],
        run.label,
      );
      for (const [i, message] of messages.entries()) {
        await assertRecord(repo, message.id, i === 1 ? undefined : max);
      }
      const again = await idempotent.processBatch(copies(), handler);
      const [a, b, c] = again.results as [ProcessResult, ProcessResult, ProcessResult];
      assert.deepEqual(
        [a, b, c].map((r) => [r.outcome, r.replayed === true]),
        [
          ['duplicate', true],
          ['duplicate', false],
          ['duplicate', true],
        ],
        run.label,
      );
      assertSame(a.result, atLimit, `${run.label}: the first replayed result`);
      assert.equal(b.result, undefined, run.label);
      assertSame(c.result, atLimit, `${run.label}: the third replayed result`);
      assert.equal(runs, 3, `${run.label}: a handler ran again`);
    }
  });
}
