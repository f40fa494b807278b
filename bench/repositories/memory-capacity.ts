/**
 * What a new id costs the memory store once it holds `maxEntries` (each add evicts one), against the same adds
 * below the bound, in one run: CPU µs per add and their ratio (≈1 is the target; eviction used to walk every
 * deleted slot at the front of the map, 25× at 100k entries). Asserts nothing.
 *
 *   node --import tsx bench/repositories/memory-capacity.ts [--entries 100000] [--rounds 3]
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { MemoryRepository } from '../../src/repositories/memory/index.js';

const { values } = parseArgs({
  options: { entries: { type: 'string', default: '100000' }, rounds: { type: 'string', default: '3' } },
});
const N = Number(values.entries);
const ROUNDS = Number(values.rounds);
const options = { ttlMs: 3_600_000 };

/** CPU µs per add of `count` new ids from `from` on. */
async function adds(repo: MemoryRepository, from: number, count: number): Promise<number> {
  const start = process.cpuUsage();
  for (let i = from; i < from + count; i++) await repo.add(`id-${i}`, options);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / count;
}

console.log(
  `memory store, ${N.toLocaleString('en')} entries, load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
const full = new MemoryRepository({ maxEntries: N });
await adds(full, 0, N);
let next = N;
for (let round = 1; round <= ROUNDS; round++) {
  const below = await adds(new MemoryRepository({ maxEntries: 2 * N }), 0, N);
  const at = await adds(full, next, N);
  next += N;
  console.log(
    `round ${round}: below the bound ${below.toFixed(2)} µs/add, at the bound ${at.toFixed(2)} µs/add, ` +
      `ratio ${(at / below).toFixed(2)}×`,
  );
}
console.log(
  `load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
