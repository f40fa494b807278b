import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DeleteTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import fc from 'fast-check';
import { IdempotentConsumer } from '../../src/consumer/index.js';
import type { Outcome } from '../../src/consumer/types.js';
import { CassandraRepository } from '../../src/repositories/cassandra/index.js';
import { DynamoDbRepository } from '../../src/repositories/dynamodb/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';
import { RedisRepository } from '../../src/repositories/redis/index.js';
import { RocksdbRepository } from '../../src/repositories/rocksdb/index.js';
import type { IdempotentRepository } from '../../src/store/types.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';

// The consumer's event-time mode against a small reference model of KIP-655, on random sequences: a few ids,
// timestamps jittered around a moving stream time (late records included), null keys, invalid timestamps,
// failing handlers, two streams, random batch sizes. The model is the KIP's processor, written for clarity:
// a window store holding every forwarded, non-late record, purged by retention.

interface Rec {
  readonly stream: string;
  readonly key: string | null;
  readonly valueId: string | null;
  /** Epoch ms; null for a record with a missing timestamp. */
  readonly ts: number | null;
  /** The handler throws on this record. */
  readonly fail: boolean;
}

interface Scenario {
  readonly intervalMs: number;
  readonly by: 'key' | 'keyValue';
  readonly invalidTimestamp: 'fail' | 'forward';
  /** Changes no decision; a long one makes the store refuse to replace purged records (remove + add path). */
  readonly extraRetentionMs: number;
  readonly records: readonly Rec[];
  /** Batch sizes, used in turn; a batch also ends where the stream changes. */
  readonly cuts: readonly number[];
}

interface StreamState {
  /** Stream time: the largest timestamp received. */
  time: number;
  /** The window store: the forwarded, non-late timestamps per id. */
  readonly store: Map<string, number[]>;
}

/** KIP-655 one record at a time, per stream. */
function reference(s: Scenario): Outcome[] {
  const streams = new Map<string, StreamState>();
  return s.records.map((r): Outcome => {
    const state = streams.get(r.stream) ?? { time: Number.NEGATIVE_INFINITY, store: new Map() };
    streams.set(r.stream, state);
    const before = state.time;
    const outcome = decide(s, r, state);
    // A failed record counts as not received (it would be retried): it does not move stream time.
    if (outcome === 'failed') state.time = before;
    return outcome;
  });
}

function decide(s: Scenario, r: Rec, state: StreamState): Outcome {
  if (r.ts !== null) state.time = Math.max(state.time, r.ts);
  const id = s.by === 'key' ? r.key : r.key === null || r.valueId === null ? null : `${r.key}|${r.valueId}`;
  if (id === null) return r.fail ? 'failed' : 'no-id';
  if (r.ts === null) return s.invalidTimestamp === 'fail' || r.fail ? 'failed' : 'processed';
  // Retention: the store holds records no older than stream time minus the interval (purged when judged, so a
  // failed record, which does not count as received, purges nothing).
  const forwarded = state.store.get(id) ?? [];
  const window = forwarded.filter((e) => e >= state.time - s.intervalMs);
  if (window.some((e) => Math.abs((r.ts as number) - e) <= s.intervalMs)) return 'duplicate';
  if (r.fail) return 'failed';
  // A record late by strictly more than the interval is forwarded but not kept.
  if (r.ts >= state.time - s.intervalMs) state.store.set(id, [...window, r.ts]);
  return 'processed';
}

const scenario: fc.Arbitrary<Scenario> = fc
  .record({
    intervalMs: fc.constantFrom(0, 1, 3, 10, 100),
    by: fc.constantFrom('key' as const, 'keyValue' as const),
    invalidTimestamp: fc.constantFrom('fail' as const, 'forward' as const),
    extraRetentionMs: fc.constantFrom(0, 7, 100_000),
    steps: fc.array(
      fc.record({
        stream: fc.constantFrom('s0', 's0', 's1'),
        key: fc.oneof({ weight: 12, arbitrary: fc.constantFrom('a', 'b', 'c') }, fc.constant(null)),
        valueId: fc.oneof({ weight: 12, arbitrary: fc.constantFrom('x', 'y') }, fc.constant(null)),
        // Stream time drifts forward in steps of about a third of the interval, sometimes back (out of order).
        drift: fc.integer({ min: -1, max: 4 }),
        // How far before (up to ~3 intervals: late) or after the drifting base the record lies.
        jitter: fc.oneof(
          { weight: 3, arbitrary: fc.double({ min: -1.2, max: 0.3, noNaN: true }) },
          fc.double({ min: -3.2, max: -1, noNaN: true }),
        ),
        invalid: fc.oneof({ weight: 24, arbitrary: fc.constant(false) }, fc.constant(true)),
        fail: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, fc.constant(true)),
      }),
      { minLength: 1, maxLength: 80 },
    ),
    cuts: fc.array(fc.oneof(fc.integer({ min: 1, max: 6 }), fc.integer({ min: 7, max: 80 })), {
      minLength: 1,
      maxLength: 8,
    }),
  })
  .map(({ steps, intervalMs, ...rest }) => {
    const unit = Math.max(1, Math.ceil(intervalMs / 3));
    const base = new Map<string, number>();
    const records = steps.map((step): Rec => {
      const b = Math.max(0, (base.get(step.stream) ?? 1_000) + step.drift * unit);
      base.set(step.stream, b);
      const ts = Math.max(0, b + Math.round(step.jitter * (intervalMs + 1)));
      return {
        stream: step.stream,
        key: step.key,
        valueId: step.valueId,
        ts: step.invalid ? null : ts,
        fail: step.fail,
      };
    });
    return { intervalMs, records, ...rest };
  });

/** Cuts the records into single-stream batches: sizes from `cuts` in turn, and a cut wherever the stream changes. */
function batches(records: readonly Rec[], cuts: readonly number[]): Rec[][] {
  const out: Rec[][] = [];
  let current: Rec[] = [];
  let c = 0;
  for (const r of records) {
    const size = cuts[c % cuts.length] as number;
    if (current.length > 0 && (current.length >= size || (current[0] as Rec).stream !== r.stream)) {
      out.push(current);
      current = [];
      c++;
    }
    current.push(r);
  }
  if (current.length > 0) out.push(current);
  return out;
}

/** Runs the scenario through a consumer, batch by batch, on streams unique to this run. */
async function consume(
  repository: IdempotentRepository,
  s: Scenario,
  cuts: readonly number[],
  minRetentionMs = 0,
): Promise<Outcome[]> {
  const run = randomUUID();
  const consumer = new IdempotentConsumer<Rec>({
    repository,
    id: 'key',
    eventTime: {
      intervalMs: s.intervalMs,
      timestamp: 'ts',
      by: s.by,
      ...(s.by === 'keyValue' ? { valueId: (r: Rec) => r.valueId } : {}),
      invalidTimestamp: s.invalidTimestamp,
      extraRetentionMs: Math.max(s.extraRetentionMs, minRetentionMs),
    },
  });
  const outcomes: Outcome[] = [];
  for (const batch of batches(s.records, cuts)) {
    const { results } = await consumer.processBatch(
      batch,
      (r) => {
        if (r.fail) throw new Error('handler failed');
      },
      { stream: `${run}:${(batch[0] as Rec).stream}` },
    );
    outcomes.push(...results.map((r) => r.outcome));
  }
  return outcomes;
}

const show = (s: Scenario) =>
  s.records.map(
    (r) => `${r.stream}:${r.key}${s.by === 'keyValue' ? `/${r.valueId}` : ''}@${r.ts}${r.fail ? '!' : ''}`,
  );

/** The property for one store: outcomes equal the model's, whatever the batch sizes. */
function matchesModel(open: () => Promise<IdempotentRepository>, numRuns: number, minRetentionMs = 0) {
  return async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const repository = await open();
        const expected = reference(s);
        assert.deepEqual(await consume(repository, s, s.cuts, minRetentionMs), expected, show(s).join(' '));
      }),
      { numRuns },
    );
  };
}

describe('event-time mode matches the KIP-655 reference model', () => {
  it(
    'memory',
    matchesModel(async () => new MemoryRepository(), 600),
  );

  it('batch boundaries do not change outcomes: one per batch, random cuts, whole runs of a stream', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        const expected = reference(s);
        for (const cuts of [[1], s.cuts, [1_000]]) {
          assert.deepEqual(await consume(new MemoryRepository(), s, cuts), expected, `cuts ${cuts}`);
        }
      }),
      { numRuns: 150 },
    );
  });

  describe('redis', { skip: skipUnlessEnabled('redis') }, () => {
    let repository: RedisRepository;
    before(async () => {
      repository = await RedisRepository.open({
        url: endpoints.redisUrl,
        keyPrefix: `idem-test:et:${randomUUID()}:`,
      });
    });
    after(async () => {
      await repository.clear();
      await repository.close();
    });
    // Redis' PX counts wall-clock time from the write, while these streams' times move by a few ms per record:
    // the store lifetime written for a kept record never breaks a decision, without extra retention.
    it(
      'shared store',
      matchesModel(async () => repository, 60, 0),
    );
  });

  describe('rocksdb', { skip: skipUnlessEnabled('rocksdb') }, () => {
    let dir: string;
    let repository: RocksdbRepository;
    before(async () => {
      dir = await mkdtemp(join(tmpdir(), 'idem-et-'));
      repository = await RocksdbRepository.open({ path: dir });
    });
    after(async () => {
      await repository.close();
      await rm(dir, { recursive: true, force: true });
    });
    // Buckets are dated on the wall clock (deadline = wall + expiresAt − now), like Redis' PX: no margin either.
    it(
      'embedded store',
      matchesModel(async () => repository, 60, 0),
    );
  });
});

// The same property on the two other shared stores, fewer runs (their round trips are slower). No extra retention:
// the wall-clock lifetime the consumer asks for (`minLifetimeMs`) is what keeps their TTLs from breaking decisions.
describe('event-time mode matches the KIP-655 reference model on DynamoDB and Cassandra', () => {
  describe('dynamodb', { skip: skipUnlessEnabled('dynamodb') }, () => {
    const table = `idem-et-${randomUUID().slice(0, 8)}`;
    let repository: IdempotentRepository;
    before(async () => {
      repository = await DynamoDbRepository.open({
        table,
        createTable: true,
        endpoint: endpoints.dynamodbEndpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
    });
    after(async () => {
      await repository.close();
      const client = new DynamoDBClient({
        region: 'us-east-1',
        endpoint: endpoints.dynamodbEndpoint,
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
      await client.send(new DeleteTableCommand({ TableName: table })).catch(() => {});
      client.destroy();
    });
    it(
      'shared store',
      matchesModel(async () => repository, 15, 0),
    );
  });

  describe('cassandra', { skip: skipUnlessEnabled('cassandra') }, () => {
    let repository: IdempotentRepository;
    before(async () => {
      repository = await CassandraRepository.open({
        contactPoints: [...endpoints.cassandraContactPoints],
        keyspace: 'idem_test',
        table: 'contract_ids',
        createSchema: true,
        namespace: `et-${randomUUID().slice(0, 8)}`,
      });
    });
    after(async () => {
      await repository.clear();
      await repository.close();
    });
    it(
      'shared store',
      matchesModel(async () => repository, 10, 0),
    );
  });
});
