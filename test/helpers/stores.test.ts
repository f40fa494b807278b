import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const STORES = fileURLToPath(new URL('./stores.ts', import.meta.url));

/** What skipUnlessEnabled answers for each server in a process started with `env`. */
function skips(env: Record<string, string>): Record<string, string | false> {
  const script = `import(${JSON.stringify(STORES)}).then((m) => console.log(JSON.stringify(Object.fromEntries(
    ['redis', 'dynamodb', 'cassandra', 'kafka', 'postgres', 'mysql', 'rocksdb'].map((s) => [s, m.skipUnlessEnabled(s)])))))`;
  const result = spawnSync(process.execPath, ['--import', 'tsx', '-e', script], {
    encoding: 'utf8',
    env: { ...process.env, IDEM_SKIP_STORES: '', IDEM_SKIP_KAFKA: '', ...env },
  });
  assert.equal(result.status, 0, result.stderr);
  return JSON.parse(result.stdout) as Record<string, string | false>;
}

// The tests read IDEM_SKIP_STORES as scripts/test.sh does, so `IDEM_SKIP_STORES=all npm run test:unit` (or a
// run on another Node, scripts/ci-node.sh) skips every server test instead of failing on servers it opted out of.
describe('IDEM_SKIP_STORES in the tests, as in scripts/test.sh', () => {
  it('"all" (or "*") opts out of every server, not of the embedded stores', () => {
    for (const all of ['all', '*', 'ALL']) {
      const answer = skips({ IDEM_SKIP_STORES: all });
      for (const server of ['redis', 'dynamodb', 'cassandra', 'kafka', 'postgres', 'mysql']) {
        assert.match(String(answer[server]), /opted out by IDEM_SKIP_STORES/, `${all}: ${server}`);
      }
      assert.equal(answer.rocksdb, false);
    }
  });

  it('takes the aliases and separators scripts/test.sh takes, and IDEM_SKIP_KAFKA', () => {
    const answer = skips({ IDEM_SKIP_STORES: 'dynalite; Redis mariadb,pg', IDEM_SKIP_KAFKA: '1' });
    assert.deepEqual(
      Object.entries(answer)
        .filter(([, reason]) => reason !== false)
        .map(([store]) => store)
        .sort(),
      ['dynamodb', 'kafka', 'mysql', 'postgres', 'redis'],
    );
    assert.ok(Object.values(skips({})).every((reason) => reason === false));
  });
});
