import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  consumerConfigSchema,
  eventTimeFromConfig,
  eventTimeKey,
  IdempotentConsumer,
  type IdempotentConsumerOptions,
  toEpochMs,
} from '../../src/consumer/index.js';
import { ConfigError, InvalidIdError, InvalidInputError, RepositoryError } from '../../src/errors.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';

interface Msg {
  key?: string | null;
  id?: string | null;
  ts?: unknown;
  meta?: { at?: unknown };
  fail?: boolean;
}

const I = 10_000;

function setup(options: Partial<IdempotentConsumerOptions<Msg>> = {}, eventTime = {}) {
  const repository = new MemoryRepository();
  const consumer = new IdempotentConsumer<Msg>({
    repository,
    id: 'key',
    eventTime: { intervalMs: I, timestamp: 'ts', ...eventTime },
    ...options,
  });
  return { consumer, repository };
}

const handler = (m: Msg) => {
  if (m.fail) throw new Error(`handler failed on ${m.key}`);
  return m.key;
};

const outcomes = (r: { results: readonly { outcome: string }[] }) => r.results.map((x) => x.outcome);

/** Counts the store calls a consumer makes. */
function spy(repository: MemoryRepository) {
  const calls: string[] = [];
  for (const method of ['getMany', 'addMany', 'get', 'add', 'containsMany', 'remove'] as const) {
    const original = repository[method].bind(repository) as (...args: unknown[]) => Promise<unknown>;
    (repository as unknown as Record<string, unknown>)[method] = (...args: unknown[]) => {
      calls.push(method);
      return original(...args);
    };
  }
  return calls;
}

describe('event-time mode: timestamps', () => {
  it('reads epoch ms from numbers, digit strings (kafkajs), bigints, Dates and ISO-8601 strings', () => {
    assert.equal(toEpochMs(1_700_000_000_000), 1_700_000_000_000);
    assert.equal(toEpochMs('1700000000000'), 1_700_000_000_000);
    assert.equal(toEpochMs(1_700_000_000_000n), 1_700_000_000_000);
    assert.equal(toEpochMs(new Date(1_700_000_000_000)), 1_700_000_000_000);
    assert.equal(toEpochMs('2023-11-14T22:13:20Z'), 1_700_000_000_000);
    assert.equal(toEpochMs(0), 0);
    for (const bad of [
      -1,
      1.5,
      Number.NaN,
      Infinity,
      '',
      'soon',
      '12 May',
      '-5',
      new Date(Number.NaN),
      {},
      true,
    ]) {
      assert.equal(toEpochMs(bad), undefined, `accepted ${String(bad)}`);
    }
  });

  it('fails a record with a missing or invalid timestamp with an InvalidInputError naming the field', async () => {
    const { consumer, repository } = setup({}, { timestamp: 'meta.at' });
    let runs = 0;
    const { results } = await consumer.processBatch(
      [
        { key: 'a' },
        { key: 'b', meta: { at: 'yesterday' } },
        { key: 'c', meta: { at: -1 } },
        { key: 'd', meta: { at: 5 } },
      ],
      () => runs++,
    );
    assert.deepEqual(outcomes({ results }), ['failed', 'failed', 'failed', 'processed']);
    assert.equal(runs, 1);
    for (const r of results.slice(0, 3)) {
      assert.ok(r.error instanceof InvalidInputError);
      assert.match(r.error.message, /timestamp field "meta\.at"/);
    }
    assert.match(String(results[0]?.error), /missing event timestamp/);
    assert.match(String(results[1]?.error), /invalid event timestamp "yesterday"/);
    assert.equal(consumer.eventTime?.stats.invalidTimestamp, 3);
    assert.equal(consumer.stats.failed, 3);
    assert.equal(await repository.contains(eventTimeKey('default', 'a'), { now: 5 }), false);
    // `process` (and so `wrap`) throws the same typed error.
    await assert.rejects(
      consumer.process({ key: 'e' }, () => 1),
      (e) => e instanceof InvalidInputError && e.location === 'timestamp field "meta.at"',
    );
  });

  it('with the forward policy, handles such a record without dedup and says so', async () => {
    const { consumer } = setup({}, { invalidTimestamp: 'forward' });
    const { results } = await consumer.processBatch(
      [{ key: 'a' }, { key: 'a' }, { key: 'a', ts: 'x' }],
      handler,
    );
    assert.deepEqual(outcomes({ results }), ['processed', 'processed', 'processed']);
    assert.ok(results.every((r) => r.invalidInput instanceof InvalidInputError));
    assert.equal(consumer.eventTime?.stats.invalidTimestamp, 3);
  });

  it('names a timestamp function in the error, and catches what it throws', async () => {
    const { consumer } = setup(
      {},
      {
        timestamp: (m: Msg) => {
          if (m.key === 'boom') throw new Error('no clock');
          return null;
        },
      },
    );
    const { results } = await consumer.processBatch([{ key: 'boom' }, { key: 'null' }], handler);
    assert.match(String(results[0]?.error), /timestamp selector: threw no clock/);
    assert.match(String(results[1]?.error), /timestamp selector: missing/);
  });
});

describe('event-time mode: decisions', () => {
  it('a failed handler keeps nothing, so the next record with that id is forwarded (in and across batches)', async () => {
    const { consumer } = setup();
    const first = await consumer.processBatch(
      [
        { key: 'a', ts: 100, fail: true },
        { key: 'a', ts: 101 },
        { key: 'a', ts: 102 },
      ],
      handler,
    );
    assert.deepEqual(outcomes(first), ['failed', 'processed', 'duplicate']);
    const second = await consumer.processBatch([{ key: 'b', ts: 100, fail: true }], handler);
    assert.deepEqual(outcomes(second), ['failed']);
    assert.deepEqual(outcomes(await consumer.processBatch([{ key: 'b', ts: 100 }], handler)), ['processed']);
  });

  it('stream time moves with every valid timestamp, discarded and null-key records included, failed ones not', async () => {
    const { consumer } = setup();
    await consumer.processBatch([{ key: 'a', ts: 100 }], handler);
    await consumer.processBatch([{ key: 'a', ts: 5_000 }], handler);
    assert.equal(consumer.eventTime?.streamTime(), 5_000, 'a discarded duplicate moves stream time');
    await consumer.processBatch([{ key: null, ts: 6_000 }], handler);
    assert.equal(consumer.eventTime?.streamTime(), 6_000, 'a null-key record moves stream time');
    // A failed record counts as not received: it will be retried (or dead-lettered) and must then be judged
    // against the stream time its first attempt saw, not one it raised itself.
    const failing = await consumer.processBatch(
      [
        { key: 'z', ts: 7_000, fail: true },
        { key: null, ts: 8_000, fail: true },
      ],
      handler,
    );
    assert.deepEqual(outcomes(failing), ['failed', 'failed']);
    assert.equal(consumer.eventTime?.streamTime(), 6_000, 'a failed record does not move stream time');
    await consumer.processBatch([{ key: 'z', ts: 'bad' }], handler);
    assert.equal(consumer.eventTime?.streamTime(), 6_000);
    // A whole-batch handler that throws leaves stream time where the batch found it (duplicates included).
    await consumer.processBatch(
      [
        { key: 'a', ts: 9_000 },
        { key: 'n', ts: 9_500 },
      ],
      {
        batch: () => {
          throw new Error('retry the batch');
        },
      },
    );
    assert.equal(consumer.eventTime?.streamTime(), 6_000);
  });

  it('a retried record is judged as its first attempt was, even when later records of the batch were deferred', async () => {
    const { consumer } = setup();
    await consumer.processBatch([{ key: 'a', ts: 1_000 }], handler);
    // As the Kafka adapter does: the first failure halts the partition and later records are declined.
    let halted = false;
    const halting = (m: Msg) => {
      if (halted || m.fail) {
        halted = true;
        throw new Error('deferred');
      }
    };
    const first = await consumer.processBatch(
      [
        { key: 'b', ts: 2_000, fail: true },
        { key: 'c', ts: 50_000 },
      ],
      halting,
    );
    assert.deepEqual(outcomes(first), ['failed', 'failed']);
    // The retry of b@2000 is not late (stream time is still 1000), so it is kept and its duplicate caught.
    const retry = await consumer.processBatch(
      [
        { key: 'b', ts: 2_000 },
        { key: 'b', ts: 2_001 },
        { key: 'c', ts: 50_000 },
      ],
      handler,
    );
    assert.deepEqual(outcomes(retry), ['processed', 'duplicate', 'processed']);
    assert.equal(consumer.eventTime?.stats.lateForwarded, 0);
  });

  it('keeps one stream time and one id space per stream', async () => {
    const { consumer } = setup();
    const p0 = { stream: 'orders:0' };
    const p1 = { stream: 'orders:1' };
    await consumer.processBatch([{ key: 'a', ts: 100_000 }], handler, p0);
    // Far behind partition 0, but partition 1 has its own stream time: not late there.
    const other = await consumer.processBatch(
      [
        { key: 'b', ts: 1_000 },
        { key: 'b', ts: 1_001 },
      ],
      handler,
      p1,
    );
    assert.deepEqual(outcomes(other), ['processed', 'duplicate']);
    // The same id on another stream is a different record, as with Kafka Streams' per-partition stores.
    assert.deepEqual(outcomes(await consumer.processBatch([{ key: 'a', ts: 1_002 }], handler, p1)), [
      'processed',
    ]);
    assert.equal(consumer.eventTime?.streamTime('orders:0'), 100_000);
    assert.equal(consumer.eventTime?.streamTime('orders:1'), 1_002);
    assert.equal(consumer.eventTime?.streamTime(), undefined);
  });

  it('by keyValue: duplicates share key and value id', async () => {
    const { consumer } = setup({}, { by: 'keyValue', valueId: 'id' });
    const { results } = await consumer.processBatch(
      [
        { key: 'k', id: '1', ts: 1 },
        { key: 'k', id: '2', ts: 2 },
        { key: 'k', id: '1', ts: 3 },
        { key: 'j', id: '1', ts: 4 },
      ],
      handler,
    );
    assert.deepEqual(outcomes({ results }), ['processed', 'processed', 'duplicate', 'processed']);
    assert.equal(results[0]?.id, '["k","1"]');
  });

  it('reports a duplicate against the kept record, with its event time and stream-time expiry', async () => {
    const { consumer } = setup();
    const seen: unknown[] = [];
    const c2 = setup({ onDuplicate: (_m, ctx) => void seen.push(ctx.existing) }).consumer;
    for (const c of [consumer, c2]) {
      const { results } = await c.processBatch(
        [
          { key: 'a', ts: 50 },
          { key: 'a', ts: 60 },
        ],
        handler,
      );
      assert.deepEqual(results[1], {
        outcome: 'duplicate',
        id: 'a',
        existing: { id: 'a', state: 'confirmed', eventTime: 50, expiresAt: 50 + I + 1 },
      });
    }
    assert.equal(seen.length, 1);
  });

  it('hands duplicates to the handler when skipDuplicate is false', async () => {
    const { consumer } = setup({ skipDuplicate: false });
    const flags: boolean[] = [];
    const { results } = await consumer.processBatch(
      [
        { key: 'a', ts: 1 },
        { key: 'a', ts: 2 },
      ],
      (_m, ctx) => {
        flags.push(ctx.duplicate);
        return ctx.duplicate ? 'dup' : 'new';
      },
    );
    assert.deepEqual(flags, [false, true]);
    assert.equal(results[1]?.result, 'dup');
    assert.equal(results[1]?.outcome, 'duplicate');
  });

  it('rejects a null key with the reject policy, and fails an oversized id without running anything', async () => {
    const { consumer } = setup({ nullId: 'reject' });
    let runs = 0;
    const { results } = await consumer.processBatch(
      [
        { key: null, ts: 1 },
        { key: 'x'.repeat(2_000), ts: 1 },
        { key: 'ok', ts: 1 },
      ],
      () => runs++,
    );
    assert.deepEqual(outcomes({ results }), ['failed', 'failed', 'processed']);
    assert.ok(results[1]?.error instanceof InvalidIdError);
    assert.equal(runs, 1);
  });

  it('serializes concurrent calls on one stream, so wrap is safe under Promise.all', async () => {
    const { consumer } = setup();
    let runs = 0;
    const handle = consumer.wrap(async () => {
      runs++;
      await new Promise((r) => setTimeout(r, 2));
    });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => handle({ key: 'same', ts: 1_000 + i })),
    );
    assert.equal(runs, 1);
    assert.equal(results.filter((r) => r.outcome === 'duplicate').length, 19);
  });

  it('calls a batch handler once; if it throws, nothing is kept', async () => {
    const { consumer } = setup();
    const calls: number[][] = [];
    const failing = await consumer.processBatch(
      [
        { key: 'a', ts: 1 },
        { key: 'a', ts: 2 },
        { key: 'b', ts: 3 },
      ],
      {
        batch: (items) => {
          calls.push(items.map((i) => i.index));
          throw new Error('all or nothing');
        },
      },
    );
    assert.deepEqual(outcomes(failing), ['failed', 'duplicate', 'failed']);
    const ok = await consumer.processBatch(
      [
        { key: 'a', ts: 4 },
        { key: 'b', ts: 5 },
        { key: 'b', ts: 6 },
      ],
      {
        batch: (items) => void calls.push(items.map((i) => i.index)),
      },
    );
    assert.deepEqual(outcomes(ok), ['processed', 'processed', 'duplicate']);
    assert.deepEqual(calls, [
      [0, 2],
      [0, 1],
    ]);
  });
});

describe('event-time mode: storage', () => {
  it('makes one getMany and one addMany per batch, judged at stream time', async () => {
    const { consumer, repository } = setup();
    const calls = spy(repository);
    const nows: unknown[] = [];
    const getMany = repository.getMany.bind(repository);
    repository.getMany = (ids, options) => {
      nows.push(options?.now);
      return getMany(ids, options);
    };
    const batch = Array.from({ length: 50 }, (_, i) => ({ key: `k${i % 20}`, ts: 1_000 + i }));
    await consumer.processBatch(batch, handler);
    assert.deepEqual(calls, ['getMany', 'addMany']);
    assert.deepEqual(nows, [1_000]);
    const stored = await repository.get(eventTimeKey('default', 'k0'), { now: 1_049 });
    assert.equal(stored?.eventTime, 1_000);
    // All records of a batch share the expiry of the latest kept one, k19@1019 (addMany takes one TTL).
    assert.equal(stored?.expiresAt, 1_019 + I + 1);
  });

  it('writes nothing for a batch of duplicates, late records and failures', async () => {
    const { consumer, repository } = setup();
    await consumer.processBatch([{ key: 'a', ts: 100_000 }], handler);
    const calls = spy(repository);
    await consumer.processBatch(
      [
        { key: 'a', ts: 100_001 },
        { key: 'late', ts: 1 },
        { key: 'f', ts: 100_002, fail: true },
      ],
      handler,
    );
    assert.deepEqual(calls, ['getMany']);
  });

  it('drops a record forwarded early in a batch once the batch moves stream time past it', async () => {
    const { consumer, repository } = setup();
    await consumer.processBatch(
      [
        { key: 'early', ts: 0 },
        { key: 'jump', ts: I + 1 },
      ],
      handler,
    );
    assert.equal(await repository.contains(eventTimeKey('default', 'early'), { now: 0 }), false);
    assert.equal(await repository.contains(eventTimeKey('default', 'jump'), { now: I + 1 }), true);
  });

  it('replaces a record the store still holds after this stream purged it (shared expiry)', async () => {
    const { consumer, repository } = setup();
    // x@0 and y@I share the expiry of y: the store holds x until stream time 2I + 1.
    await consumer.processBatch(
      [
        { key: 'x', ts: 0 },
        { key: 'y', ts: I },
      ],
      handler,
    );
    // At stream time I + 1, x@0 is purged: x@(I + 1) is new and must replace it.
    assert.deepEqual(outcomes(await consumer.processBatch([{ key: 'x', ts: I + 1 }], handler)), [
      'processed',
    ]);
    assert.equal(consumer.eventTime?.stats.rewritten, 1);
    assert.equal((await repository.get(eventTimeKey('default', 'x'), { now: I + 1 }))?.eventTime, I + 1);
    assert.deepEqual(outcomes(await consumer.processBatch([{ key: 'x', ts: 2 * I }], handler)), [
      'duplicate',
    ]);
  });

  it('purges: state stays bounded while stream time moves', async () => {
    const { consumer, repository } = setup({}, { intervalMs: 100 });
    let live = 0;
    for (let batch = 0; batch < 50; batch++) {
      const ts = batch * 1_000;
      await consumer.processBatch(
        Array.from({ length: 100 }, (_, i) => ({ key: `b${batch}-${i}`, ts: ts + i })),
        handler,
      );
      const keys = Array.from({ length: 100 * (batch + 1) }, (_, i) =>
        eventTimeKey('default', `b${Math.floor(i / 100)}-${i % 100}`),
      );
      live = (await repository.containsMany(keys, { now: ts + 99 })).filter(Boolean).length;
    }
    // Only the last batch's records (those within 100 ms of stream time, plus the shared-expiry slack) live.
    assert.ok(live <= 100, `${live} live records`);
  });

  it('lifts a restarted consumer’s stream time from the kept records it reads', async () => {
    const repository = new MemoryRepository();
    const options = { repository, id: 'key', eventTime: { intervalMs: I, timestamp: 'ts' } };
    const before = new IdempotentConsumer<Msg>(options);
    await before.processBatch([{ key: 'a', ts: 100_000 }], handler);
    const after = new IdempotentConsumer<Msg>(options);
    // Stream time was 100 000: a@50 000 is late, forwarded and not kept; a@95 000 is still a duplicate.
    const { results } = await after.processBatch(
      [
        { key: 'a', ts: 50_000 },
        { key: 'a', ts: 50_000 },
        { key: 'a', ts: 95_000 },
      ],
      handler,
    );
    assert.deepEqual(outcomes({ results }), ['processed', 'processed', 'duplicate']);
    assert.equal(after.eventTime?.streamTime(), 100_000);
  });

  it('restores a saved stream time, so late records are judged as before the restart', async () => {
    const { consumer } = setup();
    consumer.eventTime?.restoreStreamTime('p', 100_000);
    consumer.eventTime?.restoreStreamTime('p', 10);
    assert.equal(consumer.eventTime?.streamTime('p'), 100_000);
    const { results } = await consumer.processBatch(
      [
        { key: 'a', ts: 1 },
        { key: 'a', ts: 1 },
      ],
      handler,
      {
        stream: 'p',
      },
    );
    assert.deepEqual(outcomes({ results }), ['processed', 'processed']);
    assert.throws(() => consumer.eventTime?.restoreStreamTime('p', -1), InvalidInputError);
  });
});

describe('event-time mode: store failure', () => {
  class DownRepository extends MemoryRepository {
    override async getMany(): Promise<never> {
      throw new RepositoryError('connection refused');
    }
    override async addMany(): Promise<never> {
      throw new RepositoryError('connection refused');
    }
  }

  it('fail: rejects the batch before any handler runs, and leaves stream time alone', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new DownRepository(),
      id: 'key',
      eventTime: { intervalMs: I, timestamp: 'ts' },
    });
    let runs = 0;
    await assert.rejects(
      consumer.processBatch([{ key: 'a', ts: 1 }], () => runs++),
      RepositoryError,
    );
    assert.equal(runs, 0);
    assert.equal(consumer.eventTime?.streamTime(), undefined);
  });

  it('process: handles records as new (in-batch duplicates still resolved) and counts it', async () => {
    const consumer = new IdempotentConsumer<Msg>({
      repository: new DownRepository(),
      id: 'key',
      storeFailure: 'process',
      eventTime: { intervalMs: I, timestamp: 'ts' },
    });
    const { results } = await consumer.processBatch(
      [
        { key: 'a', ts: 1 },
        { key: 'a', ts: 2 },
      ],
      handler,
    );
    assert.deepEqual(outcomes({ results }), ['processed', 'duplicate']);
    assert.equal(results[0]?.failOpen, true);
    // Once per message affected, whether the read before the handler or the write after it failed.
    assert.equal(consumer.stats.failOpen, 1);
  });
});

describe('event-time mode: options', () => {
  const repository = new MemoryRepository();
  const make = (eventTime: Record<string, unknown>) =>
    new IdempotentConsumer<Msg>({ repository, id: 'key', eventTime: eventTime as never });

  it('names the offending option', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ intervalMs: -1 }, 'eventTime.intervalMs'],
      [{ intervalMs: 1.5 }, 'eventTime.intervalMs'],
      [{ intervalMs: 10, by: 'keyValue' }, 'eventTime.valueId'],
      [{ intervalMs: 10, valueId: 'id' }, 'eventTime.valueId'],
      [{ intervalMs: 10, by: 'value' }, 'eventTime.by'],
      [{ intervalMs: 10, timestamp: 'a..b' }, 'eventTime.timestamp'],
      [{ intervalMs: 10, invalidTimestamp: 'drop' }, 'eventTime.invalidTimestamp'],
      [{ intervalMs: 10, extraRetentionMs: -5 }, 'eventTime.extraRetentionMs'],
    ];
    for (const [options, key] of cases) {
      assert.throws(
        () => make(options),
        (e) => e instanceof ConfigError && e.key === key,
        JSON.stringify(options),
      );
    }
  });

  it('reads [consumer.eventTime] from config, with defaults written once', () => {
    const config = consumerConfigSchema.parse({
      id: 'key',
      eventTime: { interval: '10s', by: 'keyValue', valueId: 'payload.id' },
    });
    assert.deepEqual(config.eventTime && eventTimeFromConfig(config.eventTime), {
      intervalMs: 10_000,
      extraRetentionMs: 0,
      timestamp: 'timestamp',
      by: 'keyValue',
      valueId: 'payload.id',
      invalidTimestamp: 'fail',
    });
    assert.equal(consumerConfigSchema.parse({}).eventTime, undefined);
    assert.equal(consumerConfigSchema.safeParse({ eventTime: { interval: '-1s' } }).success, false);
    assert.equal(consumerConfigSchema.safeParse({ eventTime: { interval: '1s', window: 2 } }).success, false);
  });

  it('extraRetentionMs keeps records longer in the store without changing any decision', async () => {
    const { consumer, repository } = setup({}, { extraRetentionMs: 60_000 });
    await consumer.processBatch([{ key: 'a', ts: 0 }], handler);
    assert.equal((await repository.get(eventTimeKey('default', 'a'), { now: 0 }))?.expiresAt, I + 1 + 60_000);
    const { results } = await consumer.processBatch(
      [
        { key: 'b', ts: I + 1 },
        { key: 'a', ts: I + 1 },
      ],
      handler,
    );
    assert.deepEqual(outcomes({ results }), ['processed', 'processed']);
    assert.equal(consumer.eventTime?.stats.rewritten, 1);
  });
});
