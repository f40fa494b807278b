import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { decodePack, isPack } from '../../src/kafka/changelog/index.js';
import type {
  KafkaProducer,
  KafkaTransaction,
  ProduceRequest,
  ProduceResult,
  TransactionOffsets,
} from '../../src/kafka/port/index.js';
import { ChunkTransaction, TransactionOnlySink } from '../../src/node/exactly-once/transaction.js';
import { LoggedRepository } from '../../src/repositories/logged/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';

/**
 * Exactly-once, issue 34: a chunk's changelog records join its transaction as the chunk finishes, without waiting
 * for their acks (they were all sent at the commit, a serial wait as long as the chunks' own output). The
 * transaction's requests still go one at a time, the commit waits for all of them, and a failed one keeps the
 * transaction from committing. No broker: a transaction that records its requests and answers each when told.
 */
describe('exactly-once chunk transaction, changelog records per chunk', { timeout: 10_000 }, () => {
  it('queues each chunk’s marks as it finishes and commits only after every request was acknowledged', async (t) => {
    const { producer, tx, store } = testbed(t);
    const log = producer.log;
    await chunk(tx, store, ['a', 'b'], '2', { hold: true });
    // Chunk 1 is finished while its marks are still in flight: the next chunk is not held up by them.
    assert.deepEqual(log, ['send out [a,b]', 'send changelog [a,b]']);
    assert.equal(producer.pending(), 1, 'the marks are not acknowledged yet');
    const second = chunk(tx, store, ['c'], '3', { hold: false });
    // Its output waits for the request ahead of it (one at a time), then the commit for its own marks.
    await producer.settleAll();
    await second;
    assert.deepEqual(log, [
      'send out [a,b]',
      'send changelog [a,b]',
      'send out [c]',
      'send changelog [c]',
      'offsets 3',
      'commit',
    ]);
    // Each chunk's marks are one record (a pack): two changelog records for the three marks.
    assert.deepEqual(tx.committed, { changelogNext: 2, marks: 3 });
    assert.deepEqual(await store.inner.containsMany(['a', 'b', 'c']), [true, true, true]);
  });

  it('does not commit when a chunk’s marks were refused: the next chunk raises it and the transaction aborts', async (t) => {
    const { producer, tx, store } = testbed(t);
    await chunk(tx, store, ['a'], '1', { hold: true });
    producer.failNext(new Error('changelog refused'));
    await producer.settleAll();
    await assert.rejects(chunk(tx, store, ['b'], '2', { hold: false }), /changelog refused/);
    assert.equal(await tx.fail(), true);
    assert.ok(!producer.log.includes('commit'), producer.log.join(', '));
    assert.equal(producer.log.at(-1), 'abort');
    assert.equal(tx.committed, undefined);
    assert.deepEqual(await store.inner.containsMany(['a', 'b']), [false, false]);
  });

  it('aborts only after the requests in flight have ended', async (t) => {
    const { producer, tx, store } = testbed(t);
    await chunk(tx, store, ['a'], '1', { hold: true });
    const failing = tx.fail();
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(!producer.log.includes('abort'), 'the abort waits for the marks in flight');
    await producer.settleAll();
    assert.equal(await failing, true);
    assert.deepEqual(producer.log.slice(-2), ['send changelog [a]', 'abort']);
  });
});

/** One chunk: its output sent (acknowledged at once), its ids marked in the store, then finished. */
async function chunk(
  tx: ChunkTransaction,
  store: LoggedRepository,
  ids: readonly string[],
  nextOffset: string,
  { hold }: { hold: boolean },
): Promise<void> {
  tx.hold(hold);
  await tx.sender.send({
    topic: 'out',
    messages: ids.map((id) => ({ value: id, partition: 0 })),
  });
  await store.markMany(
    ids.map((id) => ({ id })),
    { ttlMs: 60_000 },
  );
  await tx.finish({ topic: 'in', partition: 0, letters: [], nextOffset });
}

function testbed(t: TestContext) {
  const producer = new RecordingProducer();
  const store = new LoggedRepository(new MemoryRepository(), new TransactionOnlySink(0));
  t.after(() => store.close());
  const tx = new ChunkTransaction({
    producer,
    group: { groupMetadata: () => ({ groupId: 'g' }) },
    inputTopic: 'in',
    partition: 0,
    changelogTopic: 'changelog',
    dlqTopic: 'dlq',
    store,
  });
  return { producer, tx, store };
}

/**
 * A transactional producer whose transaction logs its requests. Output requests are acknowledged at once;
 * changelog requests wait for {@link settleAll} (or fail with {@link failNext}). Two requests in flight at once
 * fail the test: the transaction must send one at a time.
 */
class RecordingProducer implements KafkaProducer {
  readonly log: string[] = [];
  #waiting: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  #inFlight = 0;
  #failure: unknown;
  #changelogNext = 0;

  pending(): number {
    return this.#waiting.length;
  }

  failNext(error: unknown): void {
    this.#failure = error;
  }

  /** Answers every waiting changelog request (and any that the answers let through), until none waits. */
  async settleAll(): Promise<void> {
    for (let round = 0; round < 20; round++) {
      await new Promise((resolve) => setImmediate(resolve));
      const waiting = this.#waiting;
      this.#waiting = [];
      for (const w of waiting) {
        const failure = this.#failure;
        this.#failure = undefined;
        if (failure === undefined) w.resolve();
        else w.reject(failure);
      }
    }
  }

  async connect(): Promise<void> {}
  async disconnect(): Promise<void> {}

  async send(): Promise<ProduceResult[]> {
    throw new Error('outside a transaction');
  }

  async transaction(): Promise<KafkaTransaction> {
    const log = this.log;
    let active = true;
    const send = async (request: ProduceRequest): Promise<ProduceResult[]> => {
      assert.equal(this.#inFlight, 0, 'one request at a time');
      this.#inFlight++;
      try {
        // Output records by value (the id), changelog records by the store keys of the ids they hold (a pack's).
        const what = request.messages
          .flatMap((m) => {
            if (request.topic === 'out') return [String(m.value)];
            const value = m.value as Buffer | null;
            return value !== null && isPack(value) ? decodePack(value).map((c) => c.key) : [String(m.key)];
          })
          .join(',');
        log.push(`send ${request.topic} [${what}]`);
        const from = request.topic === 'changelog' ? this.#changelogNext : 0;
        if (request.topic === 'changelog') {
          await new Promise<void>((resolve, reject) => this.#waiting.push({ resolve, reject }));
          this.#changelogNext += request.messages.length;
        }
        return [{ topic: request.topic, partition: 0, baseOffset: String(from) }];
      } finally {
        this.#inFlight--;
      }
    };
    return {
      send,
      transactional: true,
      sendOffsets: async (offsets: TransactionOffsets) => {
        assert.equal(this.#inFlight, 0, 'the offsets go after every request was acknowledged');
        log.push(`offsets ${offsets.topics[0]?.partitions[0]?.offset}`);
      },
      commit: async () => {
        active = false;
        log.push('commit');
      },
      abort: async () => {
        active = false;
        assert.equal(this.#inFlight, 0, 'the abort goes after the requests in flight');
        log.push('abort');
      },
      isActive: () => active,
    };
  }
}
