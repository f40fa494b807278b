import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { consumerFromConfig } from '../../src/config/consumer.js';
import { consumerConfigSchema } from '../../src/consumer/options.js';
import { NoMessageIdError } from '../../src/errors.js';
import { IdempotentConsumer, type IdempotentConsumerOptions } from '../../src/index.js';
import { MemoryRepository } from '../../src/repositories/memory/index.js';

interface Order {
  order: { id?: string | null };
  ts?: number;
}

function consumerWith(options: Partial<IdempotentConsumerOptions<Order>> = {}) {
  const warnings: { message: string; code: string }[] = [];
  const consumer = new IdempotentConsumer<Order>({
    repository: new MemoryRepository(),
    id: 'order.idd', // the typo of issue 20: every message lacks this field
    onWarning: (message, code) => warnings.push({ message, code }),
    ...options,
  });
  return { consumer, warnings };
}

describe('a message without id (issue 20: a typo in the id path must not turn dedup off in silence)', () => {
  for (const mode of ['eager', 'lazy'] as const) {
    it(`${mode} mode refuses it by default with NoMessageIdError naming the path; the handler never runs`, async () => {
      const { consumer } = consumerWith({ mode });
      let runs = 0;
      await assert.rejects(
        consumer.process({ order: { id: 'o-1' } }, () => ++runs),
        (error) =>
          error instanceof NoMessageIdError &&
          /"order\.idd"/.test(error.message) &&
          /nullId/.test(error.message),
      );
      const { results } = await consumer.processBatch(
        [{ order: { id: 'o-1' } }, { order: {} }],
        () => ++runs,
      );
      assert.deepEqual(
        results.map((r) => r.outcome),
        ['failed', 'failed'],
      );
      assert.ok(results.every((r) => r.outcome === 'failed' && r.error instanceof NoMessageIdError));
      assert.equal(runs, 0);
      assert.equal(consumer.options.nullId, 'reject');
    });
  }

  it("nullId: 'forward' in eager mode handles it without dedup and warns once, with the path, when a whole batch had none", async () => {
    const { consumer, warnings } = consumerWith({ nullId: 'forward' });
    let runs = 0;
    // Neither message has an `order.idd`: the whole batch went through undeduplicated.
    const mixed = await consumer.processBatch([{ order: { id: 'x' } }, { order: {} }], () => ++runs);
    assert.deepEqual(
      mixed.results.map((r) => r.outcome),
      ['no-id', 'no-id'],
    );
    assert.equal(warnings.length, 1, 'every message of that batch lacked order.idd');
    assert.equal(warnings[0]?.code, 'IDEM_NO_ID');
    assert.match(warnings[0]?.message ?? '', /"order\.idd"/);
    assert.match(warnings[0]?.message ?? '', /without deduplication/);
    await consumer.processBatch([{ order: {} }, { order: {} }], () => ++runs);
    await consumer.process({ order: {} }, () => ++runs);
    assert.equal(warnings.length, 1, 'warned once per consumer');
    assert.equal(runs, 5);
  });

  it('a batch where only some messages lack the id does not warn', async () => {
    const { consumer, warnings } = consumerWith({ id: 'order.id', nullId: 'forward' });
    await consumer.processBatch([{ order: { id: 'x' } }, { order: {} }], () => 1);
    assert.equal(warnings.length, 0);
  });

  it('KIP-655 event-time mode keeps forwarding null keys by default, and warns once when a whole batch had none', async () => {
    const { consumer, warnings } = consumerWith({ eventTime: { intervalMs: 1_000, timestamp: 'ts' } });
    assert.equal(consumer.options.nullId, 'forward');
    const { results } = await consumer.processBatch(
      [
        { order: {}, ts: 1 },
        { order: {}, ts: 2 },
      ],
      () => 1,
    );
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['no-id', 'no-id'],
    );
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]?.message ?? '', /"order\.idd"/);
    assert.match(warnings[0]?.message ?? '', /KIP-655/);
  });

  it('without an onWarning hook the warning is a process warning with code IDEM_NO_ID', async (t) => {
    const seen: Error[] = [];
    const listener = (warning: Error) => seen.push(warning);
    process.on('warning', listener);
    t.after(() => process.off('warning', listener));
    const consumer = new IdempotentConsumer<Order>({
      repository: new MemoryRepository(),
      id: (m) => m.order.id,
      nullId: 'forward',
    });
    await consumer.process({ order: {} }, () => 1);
    await new Promise((resolve) => setImmediate(resolve));
    const warning = seen.find((w) => (w as Error & { code?: string }).code === 'IDEM_NO_ID');
    assert.ok(warning, seen.map((w) => w.message).join('\n'));
    assert.match(warning.message, /the id function/);
  });

  it('config: [consumer] without nullId rejects in eager/lazy mode and forwards with [consumer.eventTime]', () => {
    const repository = new MemoryRepository();
    const camel = consumerFromConfig(consumerConfigSchema.parse({ id: 'order.id' }), repository);
    assert.equal(camel.options.nullId, 'reject');
    const lazy = consumerFromConfig(consumerConfigSchema.parse({ id: 'order.id', mode: 'lazy' }), repository);
    assert.equal(lazy.options.nullId, 'reject');
    const kip655 = consumerFromConfig(
      consumerConfigSchema.parse({ id: 'order.id', eventTime: { interval: '1s' } }),
      repository,
    );
    assert.equal(kip655.options.nullId, 'forward');
    const chosen = consumerFromConfig(
      consumerConfigSchema.parse({ id: 'order.id', nullId: 'forward' }),
      repository,
    );
    assert.equal(chosen.options.nullId, 'forward');
  });
});
