import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('.gitignore', () => {
  it("ignores what a trial run leaves: idem dedup's default store and npm pack's tarball", () => {
    const paths = ['.idem-store/', '.idem-store/000003.log', 'idempotent-consumer-0.1.0.tgz'];
    // `git check-ignore` prints every given path that is ignored (matched against the rules, not the disk).
    const ignored = execFileSync('git', ['check-ignore', '--no-index', ...paths], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    assert.deepEqual(ignored.split('\n').filter(Boolean), paths);
  });
});
