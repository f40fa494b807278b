import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import {
  type DuplicateRecord,
  type HandlerContext,
  IdempotentConsumer,
  type MessagePlace,
} from '../../src/consumer/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { migrate, PostgresRepository } from '../../src/repositories/postgres/index.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { modes, type TestStore, testStores } from './real-stores.js';

/** PostgreSQL too: a SQL store's record (server clock, double precision times) must tell the first-seen time alike. */
const postgres: TestStore = {
  name: 'postgres',
  skip: skipUnlessEnabled('postgres'),
  open: async (t) => {
    await migrate({ url: endpoints.postgresUrl, table: 'idem_test_audit' });
    const repository = await PostgresRepository.open({
      url: endpoints.postgresUrl,
      table: 'idem_test_audit',
      namespace: `audit-${randomUUID()}`,
    });
    t.after(async () => {
      await repository.clear();
      await repository.close();
    });
    return repository;
  },
};

interface Msg {
  readonly id: string;
  readonly offset: number;
  readonly ts?: number;
}

const TTL = 3_600_000;

/** A consumer whose `onDuplicate` keeps every audit record it is given (and the two old arguments). */
function audited(
  repository: ConstructorParameters<typeof IdempotentConsumer<Msg>>[0]['repository'],
  mode?: 'eager' | 'lazy',
) {
  const seen: { message: Msg; context: HandlerContext; duplicate: DuplicateRecord }[] = [];
  const consumer = new IdempotentConsumer<Msg>({
    repository,
    id: 'id',
    ttlMs: TTL,
    ...(mode === undefined ? {} : { mode }),
    onDuplicate: (message, context, duplicate) => {
      seen.push({ message, context, duplicate });
    },
  });
  return { consumer, seen };
}

const placeOf =
  (messages: readonly Msg[]) =>
  (i: number): MessagePlace => ({
    topic: 'in',
    partition: 0,
    offset: String((messages[i] as Msg).offset),
  });

describe('onDuplicate gets the duplicate audit record (issue 20 §5)', () => {
  for (const store of [...testStores, postgres]) {
    for (const mode of modes) {
      it(`${store.name}, ${mode}: a stored duplicate names its place and the first copy's mark time`, {
        skip: store.skip,
      }, async (t) => {
        const { consumer, seen } = audited(await store.open(t), mode);
        const first = [{ id: 'a', offset: 1 }];
        await consumer.processBatch(first, () => 'ok', { placeOf: placeOf(first) });
        assert.equal(seen.length, 0);

        const later = [
          { id: 'b', offset: 7 },
          { id: 'a', offset: 8 },
          { id: 'b', offset: 9 },
        ];
        const { results } = await consumer.processBatch(later, () => 'ok', { placeOf: placeOf(later) });
        assert.deepEqual(
          results.map((r) => r.outcome),
          ['processed', 'duplicate', 'duplicate'],
        );
        assert.equal(seen.length, 2);
        const [stored, inBatch] = seen as [(typeof seen)[0], (typeof seen)[0]];

        // The two old arguments are unchanged.
        assert.equal(stored.message, later[1]);
        assert.equal(stored.context.duplicate, true);
        assert.equal(stored.context.id, 'a');

        const existing = stored.duplicate.existing;
        assert.ok(existing !== undefined && existing.state === 'confirmed');
        assert.deepEqual(stored.duplicate, {
          id: 'a',
          reason: 'stored',
          place: { topic: 'in', partition: 0, offset: '8' },
          firstPlace: undefined,
          firstSeen: existing.firstSeenAt,
          firstSeenFrom: 'record',
          existing,
        });
        assert.ok(Number.isFinite(stored.duplicate.firstSeen));

        if (store.name === 'postgres') {
          // A transactional store runs each message of the batch in its own transaction (`transaction:
          // 'message'`): the first "b" is committed before the second is looked up, so the second is stored.
          const existingB = inBatch.duplicate.existing;
          assert.ok(existingB !== undefined);
          assert.deepEqual(inBatch.duplicate, {
            id: 'b',
            reason: 'stored',
            place: { topic: 'in', partition: 0, offset: '9' },
            firstPlace: undefined,
            firstSeen: existingB.firstSeenAt,
            firstSeenFrom: 'record',
            existing: existingB,
          });
          return;
        }
        assert.deepEqual(inBatch.duplicate, {
          id: 'b',
          reason: 'batch',
          place: { topic: 'in', partition: 0, offset: '9' },
          firstPlace: { topic: 'in', partition: 0, offset: '7' },
          firstSeen: undefined,
          firstSeenFrom: undefined,
          existing: undefined,
        });
      });
    }
  }

  it("another worker's live claim is an in-flight duplicate with the claim's first-seen time", async () => {
    const repository = new MemoryRepository();
    const claimedAt = Date.now() - 1_000;
    await repository.add('c', { ttlMs: TTL, leaseMs: 60_000, owner: 'another worker', now: claimedAt });
    const seen: DuplicateRecord[] = [];
    const consumer = new IdempotentConsumer<Msg>({
      repository,
      id: 'id',
      inProgress: 'duplicate',
      onDuplicate: (_message, _context, duplicate) => {
        seen.push(duplicate);
      },
    });
    await consumer.process({ id: 'c', offset: 3 }, () => 'ok');
    assert.equal(seen[0]?.reason, 'in-flight');
    assert.equal(seen[0]?.firstSeen, claimedAt);
    assert.equal(seen[0]?.firstSeenFrom, 'record');
  });

  it('a record of an older version (no firstSeenAt): retention end minus ttlMs when confirmed', async () => {
    const repository = new MemoryRepository();
    const expiresAt = Date.now() + TTL / 2;
    repository.localRecords.put('old', { id: 'old', state: 'confirmed', expiresAt });
    const seen: DuplicateRecord[] = [];
    const consumer = new IdempotentConsumer<Msg>({
      repository,
      id: 'id',
      ttlMs: TTL,
      onDuplicate: (_message, _context, duplicate) => {
        seen.push(duplicate);
      },
    });
    await consumer.process({ id: 'old', offset: 3 }, () => 'ok');
    assert.equal(seen[0]?.firstSeen, expiresAt - TTL);
    assert.equal(seen[0]?.firstSeenFrom, 'retention');
  });

  it("an older version's in-flight claim is a duplicate whose first-seen time cannot be told", async () => {
    const repository = new MemoryRepository();
    const until = Date.now() + 60_000;
    repository.localRecords.put('c', {
      id: 'c',
      state: 'in-flight',
      expiresAt: until,
      leaseExpiresAt: until,
      owner: 'another worker',
    });
    const seen: { duplicate: DuplicateRecord }[] = [];
    const consumer = new IdempotentConsumer<Msg>({
      repository,
      id: 'id',
      inProgress: 'duplicate',
      onDuplicate: (_message, _context, duplicate) => {
        seen.push({ duplicate });
      },
    });
    const { outcome } = await consumer.process({ id: 'c', offset: 3 }, () => 'ok');
    assert.equal(outcome, 'duplicate');
    const { duplicate } = seen[0] as (typeof seen)[0];
    assert.equal(duplicate.reason, 'in-flight');
    assert.equal(duplicate.firstSeen, undefined);
    assert.equal(duplicate.firstSeenFrom, undefined);
    assert.equal(duplicate.place, undefined, 'no placeOf given: the place is said to be unknown');
    assert.equal(duplicate.existing?.owner, 'another worker');
  });

  it("event-time mode: firstSeen is the first copy's event time, kept with the record", async () => {
    const seen: DuplicateRecord[] = [];
    const consumer = new IdempotentConsumer<Msg>({
      repository: new MemoryRepository(),
      id: 'id',
      eventTime: { intervalMs: 10_000, timestamp: 'ts' },
      onDuplicate: (_message, _context, duplicate) => {
        seen.push(duplicate);
      },
    });
    await consumer.processBatch([{ id: 'e', offset: 1, ts: 1_000 }], () => 'ok');
    await consumer.processBatch([{ id: 'e', offset: 2, ts: 4_000 }], () => 'ok');
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.reason, 'stored');
    assert.equal(seen[0]?.firstSeen, 1_000);
    assert.equal(seen[0]?.firstSeenFrom, 'event-time');
  });
});
