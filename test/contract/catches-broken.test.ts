import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';

const suite = fileURLToPath(new URL('./broken/broken.suite.ts', import.meta.url));
const forgetful = fileURLToPath(new URL('./broken/forgetful-wrapper.suite.ts', import.meta.url));

/** Runs a suite file that must fail; answers the names of its failed tests, and its output. */
function failedTests(file: string): { failed: string[]; output: string } {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', file], {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, NODE_TEST_CONTEXT: undefined },
  });
  assert.notEqual(run.status, 0, `the suite passed a broken store (${file})`);
  const failed = run.stdout
    .split('\n')
    .filter((line) => /^\s*not ok \d+ - /.test(line))
    .map((line) => line.replace(/^\s*not ok \d+ - /, '').trim());
  return { failed, output: run.stdout };
}

it('the contract suite fails against a wrapper whose fast paths skip its changelog', () => {
  const { failed, output } = failedTests(forgetful);
  assert.ok(
    failed.includes('a write through every verb, fast paths included, is held after a reopen'),
    `not caught\nfailed: ${failed.join(' | ')}`,
  );
  // The suite blames the forgotten verbs, not the ones the wrapper logs.
  const blamed = /writes lost at the reopen, by verb: ([^\n']*)/.exec(output)?.[1] ?? '';
  assert.deepEqual([...new Set(blamed.split(', '))].sort(), ['addDirect', 'markDirect'], blamed);
});

it('the contract suite fails against a deliberately broken repository', () => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', suite], {
    encoding: 'utf8',
    timeout: 120_000,
    // Without this, the child test runner reports into ours instead of printing its own TAP.
    env: { ...process.env, NODE_TEST_CONTEXT: undefined },
  });
  assert.notEqual(run.status, 0, 'the suite passed a broken store');
  const failed = run.stdout
    .split('\n')
    .filter((line) => /^\s*not ok \d+ - /.test(line))
    .map((line) => line.replace(/^\s*not ok \d+ - /, '').trim());
  // Each defect must be caught by the test written for it.
  for (const expected of [
    'lets exactly one of 100 concurrent adds of one id win',
    'treats a confirmed id as a duplicate until its TTL, then as new',
    'frees an unconfirmed claim when its lease ends, and not before',
    'confirm and remove by another owner change nothing',
    'a namespace never sees the ids of a namespace it is a prefix of, nor the other way round',
    'clear() of a namespace leaves the ids of a namespace it is a prefix of, and the other way round',
    'keeps the result given to confirm and returns it from get, add and getMany',
    'batch adds, marks and confirms keep each id’s first-seen time',
  ]) {
    assert.ok(failed.includes(expected), `not caught: ${expected}\nfailed: ${failed.join(' | ')}`);
  }
});
