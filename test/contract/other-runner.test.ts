// The exported suite runs on another runner's describe/it: here a minimal one that collects the tests while the
// suite declares them, as Vitest, Jest and Mocha do, and runs them afterwards.
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { repositoryContract, type TestBody } from 'idempotent-consumer/contract';
import { MemoryRepository } from '../../src/repositories/memory/index.js';

function collectingRunner() {
  const path: string[] = [];
  const tests: Array<{ name: string; fn: TestBody }> = [];
  const skipped: string[] = [];
  const runnerIt = (name: string, fn: TestBody) => {
    tests.push({ name: [...path, name].join(' > '), fn });
  };
  runnerIt.skip = (name: string) => {
    skipped.push([...path, name].join(' > '));
  };
  const describe = (name: string, fn: () => void) => {
    path.push(name);
    try {
      fn();
    } finally {
      path.pop();
    }
  };
  return { runner: { describe, it: runnerIt }, tests, skipped };
}

it('registers every contract test with the given runner, and they pass there', async () => {
  const { runner, tests, skipped } = collectingRunner();
  repositoryContract({
    name: 'memory',
    factory: async () => new MemoryRepository(),
    capabilities: new MemoryRepository().capabilities,
    runner,
  });
  assert.ok(tests.length >= 30, `only ${tests.length} tests registered`);
  assert.ok(
    tests.some(
      (t) =>
        t.name ===
        'memory repository contract > basic > lets exactly one of 100 concurrent adds of one id win',
    ),
  );
  // The memory store declares persistent: false, so the reopen tests are skipped, with the reason in their names.
  assert.deepEqual(skipped, [
    'memory repository contract > results > keeps results and fingerprints across close and reopen when persistent (skipped: the store declares persistent: false)',
    'memory repository contract > lifecycle > keeps its ids across close and reopen when persistent (skipped: the store declares persistent: false)',
    'memory repository contract > verbs > a write through every verb, fast paths included, is held after a reopen (skipped: the store declares persistent: false)',
  ]);
  const failures: string[] = [];
  for (const test of tests) {
    await test.fn().catch((error: unknown) => failures.push(`${test.name}: ${String(error)}`));
  }
  assert.deepEqual(failures, []);
});

it('accepts `test` in place of `it`, and refuses a runner without describe', () => {
  const { runner, tests } = collectingRunner();
  repositoryContract({
    name: 'memory',
    factory: async () => new MemoryRepository(),
    capabilities: new MemoryRepository().capabilities,
    runner: { describe: runner.describe, test: runner.it },
  });
  assert.ok(tests.length >= 30);
  assert.throws(
    () =>
      repositoryContract({
        name: 'memory',
        factory: async () => new MemoryRepository(),
        capabilities: new MemoryRepository().capabilities,
        runner: { it: runner.it },
      }),
    { name: 'TypeError', message: 'runner.describe must be a function' },
  );
});
