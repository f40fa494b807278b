import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { z } from 'zod';
import { forgetRecords, inspectRecords, parseIds } from '../../src/cli/records.js';
import { consumerOptionsFromConfig } from '../../src/config/consumer.js';
import { loadConfig } from '../../src/config/load.js';
import { consumerConfigSchema } from '../../src/consumer/options.js';
import { ConfigError, InvalidIdError } from '../../src/errors.js';
import { IdempotentConsumer, type IdempotentConsumerOptions } from '../../src/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';

// Issue 36 §3: a replay epoch lets deliberately re-read messages run once more. Its store ids must never
// collide with another epoch's, nor with the ids stored without an epoch.

interface Msg {
  id: unknown;
  ts?: number;
}

function consumer(repository: MemoryRepository, options: Partial<IdempotentConsumerOptions<Msg>> = {}) {
  return new IdempotentConsumer<Msg>({ repository, id: 'id', ...options });
}

/** Handles every message in one batch; the ids whose handler ran. */
async function ran(c: IdempotentConsumer<Msg>, ids: readonly unknown[]): Promise<unknown[]> {
  const seen: unknown[] = [];
  const { results } = await c.processBatch(
    ids.map((id) => ({ id })),
    (message) => {
      seen.push(message.id);
    },
  );
  for (const r of results) if (r.outcome === 'failed') throw r.error;
  return seen;
}

/**
 * Ids chosen against the encoding: NUL-led text (escaped by toKey), the text of a binary key, bytes, ids
 * holding NUL and ":" (the epoch's delimiters), and what another epoch's prefix would look like as a text id.
 */
const EDGE_IDS: readonly unknown[] = [
  'a',
  '1',
  1,
  '\u0000a',
  '\u0000\u0000epoch:1\u0000a',
  '\u0000b64:YQ==',
  Buffer.from('a'),
  Buffer.from([0, 0x65]),
  'epoch:1\u0000a',
  '1\u0000a',
  ':a',
  '2\u0000\u0000epoch:1\u0000a',
];

/** Epochs whose texts are prefixes of each other, or would be if the delimiter were not NUL. */
const EPOCHS: readonly (string | number | undefined)[] = [undefined, '1', '12', '1:2', 'a', 2];

describe('replayEpoch', () => {
  for (const mode of ['eager', 'lazy'] as const) {
    it(`${mode}: every (epoch, id) pair is its own store id; the same epoch again runs nothing`, async () => {
      const repository = new MemoryRepository();
      let total = 0;
      for (const replayEpoch of EPOCHS) {
        const c = consumer(repository, { mode, replayEpoch });
        // '1' and 1 are one id (canonical key "1"), so each epoch runs one handler fewer than there are ids.
        const first = await ran(c, EDGE_IDS);
        assert.equal(first.length, EDGE_IDS.length - 1, `epoch ${String(replayEpoch)}: each id once`);
        total += first.length;
        assert.deepEqual(await ran(c, EDGE_IDS), [], `epoch ${String(replayEpoch)} again: all duplicates`);
      }
      assert.equal(repository.size, total, 'one record per (epoch, id)');
      // The number 2 and the text "2" are one epoch.
      assert.deepEqual(await ran(consumer(repository, { mode, replayEpoch: '2' }), EDGE_IDS), []);
    });
  }

  it('refuses text ids that start with NUL "epoch:", with or without an epoch (they could be an epoch id)', async () => {
    for (const replayEpoch of [undefined, '1']) {
      const repository = new MemoryRepository();
      const c = consumer(repository, { replayEpoch });
      const { results } = await c.processBatch(
        [{ id: '\u0000epoch:1\u0000a' }, { id: 'a' }, { id: '\u0000epoch' }],
        () => undefined,
      );
      assert.equal(results[0]?.outcome, 'failed');
      assert.ok(results[0]?.outcome === 'failed' && results[0].error instanceof InvalidIdError);
      assert.match(
        String(results[0]?.outcome === 'failed' && results[0].error),
        /reserved for replay epochs/,
      );
      assert.equal(results[1]?.outcome, 'processed');
      assert.equal(results[2]?.outcome, 'processed', 'only the whole mark is reserved');
    }
  });

  it("reports the user's ids: results, onDuplicate, onOutcome; a stored record's id carries the epoch", async () => {
    const repository = new MemoryRepository();
    const duplicates: string[] = [];
    const outcomes: (string | undefined)[] = [];
    const c = consumer(repository, {
      replayEpoch: 'fix-1',
      storeResult: true,
      onDuplicate: (_m, _c, record) => {
        duplicates.push(record.id);
      },
      onOutcome: (event) => {
        outcomes.push(event.id);
      },
    });
    const { results } = await c.processBatch([{ id: 'o-1' }, { id: 'o-1' }], (m) => `done ${String(m.id)}`);
    assert.deepEqual(
      results.map((r) => [r.outcome, r.id]),
      [
        ['processed', 'o-1'],
        ['duplicate', 'o-1'],
      ],
    );
    const replay = await c.process({ id: 'o-1' }, () => 'again');
    assert.equal(replay.outcome, 'duplicate');
    assert.equal(replay.id, 'o-1');
    assert.ok(replay.outcome === 'duplicate' && replay.replayed && replay.result === 'done o-1');
    assert.deepEqual(duplicates, ['o-1', 'o-1']);
    assert.deepEqual(outcomes, ['o-1', 'o-1', 'o-1']);
    assert.equal(
      replay.existing?.id,
      '\u0000\u0000epoch:fix-1\u0000o-1',
      'the canonical key of the epoch id',
    );
  });

  it("an id too long once the epoch is added fails alone, with the store's limit", async () => {
    const repository = new MemoryRepository();
    const long = 'x'.repeat(1024);
    assert.equal((await ran(consumer(repository), [long])).length, 1, 'fits without an epoch');
    const c = consumer(repository, { replayEpoch: 'e' });
    const { results } = await c.processBatch([{ id: long }, { id: 'short' }], () => undefined);
    assert.ok(results[0]?.outcome === 'failed' && results[0].error instanceof InvalidIdError);
    assert.match(String(results[0].outcome === 'failed' && results[0].error), /limit is 1024/);
    assert.equal(results[1]?.outcome, 'processed');
  });

  it('event-time mode: a new epoch forwards a record again within the interval; duplicates still dropped', async () => {
    const repository = new MemoryRepository();
    const options = (replayEpoch?: string) => ({
      replayEpoch,
      eventTime: { intervalMs: 60_000, timestamp: 'ts' },
    });
    const batch = [
      { id: 'k', ts: 1_000 },
      { id: 'k', ts: 2_000 },
      { id: 'j', ts: 3_000 },
    ];
    const forwarded = async (c: IdempotentConsumer<Msg>) =>
      (await c.processBatch(batch, () => undefined)).results.filter((r) => r.outcome === 'processed').length;
    assert.equal(await forwarded(consumer(repository, options())), 2);
    assert.equal(await forwarded(consumer(repository, options())), 0, 'a restarted consumer, same epoch');
    assert.equal(await forwarded(consumer(repository, options('r1'))), 2, 'a new epoch: once more');
    assert.equal(await forwarded(consumer(repository, options('r1'))), 0);
  });

  it('takes only an epoch name or a whole number', () => {
    for (const bad of ['', 'a b', 'x\u0000', 'é', 'a'.repeat(65), -1, 1.5]) {
      assert.throws(
        () => consumer(new MemoryRepository(), { replayEpoch: bad as string }),
        (error) => error instanceof ConfigError && /replayEpoch/.test(error.message),
        JSON.stringify(bad),
      );
    }
    for (const good of ['2026-12-06-fix', 'v2.1:a_b', '0', 0, 7, 'a'.repeat(64)]) {
      consumer(new MemoryRepository(), { replayEpoch: good });
    }
  });

  it('[consumer] replayEpoch and IDEM__CONSUMER__REPLAY_EPOCH name the same epoch, as text', async () => {
    const schema = z.object({ consumer: consumerConfigSchema.prefault({}) });
    const fromEnv = await loadConfig(schema, { env: { IDEM__CONSUMER__REPLAY_EPOCH: '007' } });
    assert.equal(fromEnv.consumer.replayEpoch, '007', 'not the number 7');
    const toml = (value: string) => ({ text: `[consumer]\nreplayEpoch = ${value}\n`, env: {} });
    const fromFile = await loadConfig(schema, toml('"007"'));
    assert.equal(fromFile.consumer.replayEpoch, '007');
    await assert.rejects(
      loadConfig(schema, toml('7')),
      (error) =>
        error instanceof ConfigError && /replayEpoch/.test(error.message) && /text/.test(error.message),
    );
    const repository = new MemoryRepository();
    assert.equal(consumerOptionsFromConfig(fromFile.consumer, repository, { id: 'id' }).replayEpoch, '007');
    const unset = consumerOptionsFromConfig(consumerConfigSchema.parse({}), repository, { id: 'id' });
    assert.equal(unset.replayEpoch, undefined, 'unset: ids stored as before');
  });
});

describe('idem inspect / forget --replay-epoch', () => {
  it("names an epoch's ids: inspect finds them, forget removes them so they run again", async () => {
    const repository = new MemoryRepository();
    const c = consumer(repository, { replayEpoch: 'fix-1' });
    const bytes = Buffer.from([0, 0xff]);
    assert.equal((await ran(c, ['o-1', bytes])).length, 2);

    const [plain] = await inspectRecords(repository, parseIds(['o-1']));
    assert.equal(plain?.state, 'absent', 'without the epoch: not the id stored');
    const reports = await inspectRecords(repository, [
      ...parseIds(['o-1'], 'text', 'fix-1'),
      ...parseIds(['00ff'], 'hex', 'fix-1'),
      ...parseIds(['o-1'], 'text', 'fix-2'),
    ]);
    assert.deepEqual(
      reports.map((r) => [r.id, r.state]),
      [
        ['o-1', 'confirmed'],
        ['00ff', 'confirmed'],
        ['o-1', 'absent'],
      ],
    );
    const forgotten = await forgetRecords(repository, parseIds(['o-1'], 'text', 'fix-1'));
    assert.deepEqual(forgotten, [{ id: 'o-1', outcome: 'removed', was: 'confirmed' }]);
    assert.deepEqual(await ran(c, ['o-1', bytes]), ['o-1'], 'forgotten in its epoch: runs once more');
    assert.throws(() => parseIds(['o-1'], 'text', 'a b'), /--replay-epoch/);
  });
});
