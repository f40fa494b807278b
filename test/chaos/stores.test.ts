import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { ledgerLines, passed, verdict } from './ledger.js';
import { chaosSizes, SHORT } from './sizes.js';
import { runStoreChaos, STORE_SCENARIOS, STORES } from './store-scenarios.js';

// The chaos rig's store scenarios at the short size (test/chaos/run.ts runs them at full size): worker processes
// on private Redis and PostgreSQL servers, paused, their server restarted, their network disturbed; each run's
// ledger must show 0 lost, 0 stuck, and no more duplicates than the guarantee allows. See docs/reliability.md.

const sizes = chaosSizes(SHORT);

for (const scenario of STORE_SCENARIOS) {
  describe(`chaos: ${scenario}`, { concurrency: true }, () => {
    for (const store of STORES) {
      // The servers are private, but a run that opts a store out (IDEM_SKIP_STORES, the Node 24 step) skips it too.
      const skip = skipUnlessEnabled(store === 'redis' ? 'redis' : 'postgres');
      it(`${store}: 0 lost, 0 stuck, duplicates within the guarantee`, {
        timeout: 180_000,
        skip,
      }, async (t) => {
        const { ledger, workers } = await runStoreChaos(scenario, store, sizes, (line) => t.diagnostic(line));
        t.diagnostic(verdict(ledger));
        const detail = [verdict(ledger), ...ledgerLines(ledger), JSON.stringify(workers)].join('\n');
        assert.equal(ledger.lost, 0, detail);
        assert.equal(ledger.stuck, 0, detail);
        assert.ok(ledger.extraEffects <= ledger.allowedExtra, detail);
        assert.ok(passed(ledger), detail);
      });
    }
  });
}
