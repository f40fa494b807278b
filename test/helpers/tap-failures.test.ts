import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const SCRIPT = fileURLToPath(new URL('../../scripts/tap-failures.mjs', import.meta.url));

// A failed `npm test` ends by naming its failed tests (scripts/test.sh): a CI log read from its tail showed only
// "# fail 1", thousands of lines below the test that failed.
describe('scripts/tap-failures.mjs', () => {
  async function run(t: import('node:test').TestContext, tests: string) {
    const dir = await mkdtemp(join(tmpdir(), 'idem-tap-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    await writeFile(join(dir, 'sample.test.mjs'), tests);
    const tap = spawnSync(process.execPath, ['--test', '--test-reporter=tap', join(dir, 'sample.test.mjs')], {
      encoding: 'utf8',
      // Without this the child reports to this runner instead of printing TAP.
      env: { ...process.env, NODE_TEST_CONTEXT: undefined },
    });
    await writeFile(join(dir, 'tap.log'), tap.stdout);
    return spawnSync(process.execPath, [SCRIPT, join(dir, 'tap.log')], { encoding: 'utf8' });
  }

  it('names each failed test with its suites, location and error, not the suites that only contain it', async (t) => {
    const result = await run(
      t,
      `import { describe, it } from 'node:test';
import assert from 'node:assert';
describe('outer', () => {
  describe('inner', () => {
    it('works', () => {});
    it('breaks', () => assert.equal(1, 2, 'one is not two'));
  });
});
it('throws', () => { throw new Error('boom'); });
`,
    );
    assert.equal(result.status, 0, result.stderr);
    const lines = result.stdout.trim().split('\n');
    assert.equal(lines[0], 'not ok: outer > inner > breaks');
    assert.match(lines[1] ?? '', /location: '.*sample\.test\.mjs:6:/);
    assert.match(result.stdout, /one is not two/);
    assert.match(result.stdout, /not ok: throws\n.*sample\.test\.mjs:9:.*\n\s+boom/);
    assert.doesNotMatch(result.stdout, /not ok: outer\n|not ok: outer > inner\n/);
    assert.equal(lines.at(-1), '2 failed tests');
  });

  it('says so when the log has no failed test', async (t) => {
    const result = await run(t, `import { it } from 'node:test';\nit('works', () => {});\n`);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /no TAP "not ok" line found/);
  });
});
