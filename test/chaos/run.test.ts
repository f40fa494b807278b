import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// `npm run chaos` (test/chaos/run.ts) must end, failing, when a scenario never finishes: before its scenario time
// limit, such a scenario hung the whole run. `--self-check` adds one that waits for what never happens.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('npm run chaos', () => {
  it('exits 1 naming a scenario that can never finish, after running its cleanup', {
    timeout: 180_000,
  }, async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'test/chaos/run.ts',
        '--self-check',
        '--only',
        '^self-check/',
        '--scenario-timeout-ms',
        '2000',
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    assert.equal(code, 1, output);
    assert.match(output, /self-check\/never-finishes: cleanup ran/, output);
    assert.match(
      output,
      /^FAIL self-check\/never-finishes: self-check\/never-finishes did not finish within 2 s/m,
      output,
    );
    assert.match(output, /^0 passed, 1 failed$/m, output);
  });
});
