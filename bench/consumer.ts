/**
 * Wrapper overhead: what `IdempotentConsumer` adds per message on top of calling the handler directly, with the
 * memory repository (so the store costs next to nothing). Prints figures; asserts nothing.
 *
 *   npm run bench:consumer [-- --messages 1000000] [--passes 5] [--json figures.json]
 */
import { parseArgs } from 'node:util';
import { IdempotentConsumer } from '../src/consumer/index.js';
import { MemoryRepository } from '../src/repositories/memory/index.js';
import { FigureSink } from './report/figures.js';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '1000000' },
    passes: { type: 'string', default: '5' },
    json: { type: 'string' },
  },
});
const sink = new FigureSink('consumer', `npm run bench:consumer -- --messages ${values.messages}`);
const N = Number(values.messages);
const PASSES = Math.max(1, Number(values.passes));
const messages = Array.from({ length: N }, (_, i) => ({ id: `m-${i % Math.floor(N * 0.9)}`, n: i }));
let total = 0;
const handler = async (m: { n: number }) => {
  total += m.n;
};

/** Best of `--passes` timed passes after a warm-up pass (JIT): the least disturbed by a shared machine. */
async function time(label: string, run: () => Promise<void>): Promise<number> {
  await run();
  let best = Number.POSITIVE_INFINITY;
  for (let pass = 0; pass < PASSES; pass++) {
    const start = process.hrtime.bigint();
    await run();
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e3 / N);
  }
  console.log(`${label.padEnd(44)} ${best.toFixed(3)} µs/msg`);
  sink.figure(label, best, 'µs/msg');
  return best;
}

const direct = await time('baseline: handler called directly', async () => {
  for (const m of messages) await handler(m);
});

// What deduplication costs at the very least: one has + set per message on a bare Map (issue 9's yardstick).
const bareMap = await time('baseline: bare Map has+set, then handler', async () => {
  const seen = new Map<string, number>();
  for (const m of messages) {
    if (seen.has(m.id)) continue;
    seen.set(m.id, m.n);
    await handler(m);
  }
});

const fresh = () =>
  new IdempotentConsumer<{ id: string; n: number }>({
    repository: new MemoryRepository({ maxEntries: N }),
    id: 'id',
  });

let consumer = fresh();
const wrapped = await time('wrap(), eager, memory repository', async () => {
  consumer = fresh();
  const handle = consumer.wrap(handler);
  for (const m of messages) await handle(m);
});

const lazy = await time('wrap(), lazy, memory repository', async () => {
  const c = new IdempotentConsumer<{ id: string; n: number }>({
    repository: new MemoryRepository({ maxEntries: N }),
    id: 'id',
    mode: 'lazy',
  });
  const handle = c.wrap(handler);
  for (const m of messages) await handle(m);
});

// Issue 10: the payload digest (canonical JSON + SHA-256) and a stored result, each beside plain eager wrap.
const fingerprinted = await time('wrap(), eager, fingerprint: true', async () => {
  const c = new IdempotentConsumer<{ id: string; n: number }>({
    repository: new MemoryRepository({ maxEntries: N }),
    id: 'id',
    fingerprint: true,
  });
  const handle = c.wrap(handler);
  for (const m of messages) await handle(m);
});

const withResult = await time('wrap(), eager, storeResult: true', async () => {
  const c = new IdempotentConsumer<{ id: string; n: number }>({
    repository: new MemoryRepository({ maxEntries: N }),
    id: 'id',
    storeResult: true,
  });
  const handle = c.wrap((m) => ({ total: m.n }));
  for (const m of messages) await handle(m);
});

const batched = await time('processBatch(1000), eager, memory repository', async () => {
  const c = fresh();
  for (let i = 0; i < N; i += 1000) await c.processBatch(messages.slice(i, i + 1000), handler);
});

console.log('');
console.log(`overhead per message, wrap eager:   ${(wrapped - direct).toFixed(3)} µs (target ≤ 2 µs)`);
console.log(`overhead per message, wrap lazy:    ${(lazy - direct).toFixed(3)} µs`);
console.log(`overhead per message, batch eager:  ${(batched - direct).toFixed(3)} µs`);
console.log(`fingerprint cost per message:       ${(fingerprinted - wrapped).toFixed(3)} µs`);
console.log(`storeResult cost per message:       ${(withResult - wrapped).toFixed(3)} µs`);
console.log(`ratio wrap eager / bare Map: ${(wrapped / bareMap).toFixed(2)}x`);
console.log(`ratio wrap lazy / bare Map:  ${(lazy / bareMap).toFixed(2)}x`);
console.log(`ratio batch eager / bare Map: ${(batched / bareMap).toFixed(2)}x`);
console.log(`ratio fingerprint / wrap eager: ${(fingerprinted / wrapped).toFixed(2)}x`);
console.log(`ratio storeResult / wrap eager: ${(withResult / wrapped).toFixed(2)}x`);
console.log(
  `ratio wrap/direct: ${(wrapped / direct).toFixed(1)}x; outcomes: ${JSON.stringify(consumer.stats)}`,
);
sink.ratio({
  id: 'consumer.wrap-eager-vs-map',
  label: 'wrap() eager over memory, per message',
  value: wrapped / bareMap,
  target: 2,
  kind: 'max',
  baseline: 'bare Map has+set, then handler',
});
sink.ratio({
  id: 'consumer.wrap-lazy-vs-map',
  label: 'wrap() lazy over memory, per message',
  value: lazy / bareMap,
  kind: 'max',
  baseline: 'bare Map has+set, then handler',
});
sink.write(values.json);
console.log(
  `load average: ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
if (total === -1) console.log('');
