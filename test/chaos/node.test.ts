import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { testKafkaClientName } from '../helpers/kafka.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { ledgerLines, verdict } from './ledger.js';
import { brokerRestart, NODE_AT_LEAST_ONCE_FREEZE_EXTRA_ALLOWED, nodeFreeze } from './node-scenarios.js';
import { chaosSizes, SHORT } from './sizes.js';

// The chaos rig's dedup-node scenarios at the short size, on the Kafka client IDEM_KAFKA_CLIENT names (the suite
// runs this file once per client). See test/chaos/node-scenarios.ts and docs/reliability.md.

const sizes = chaosSizes(SHORT);
const client = testKafkaClientName();

describe('chaos: the dedup node', { skip: skipUnlessEnabled('kafka'), concurrency: true }, () => {
  it('an instance frozen past its session, exactly-once: 0 lost, 0 duplicates', {
    timeout: 300_000,
  }, async (t) => {
    const ledger = await nodeFreeze(t, client, 'exactly-once', sizes, (line) => t.diagnostic(line));
    t.diagnostic(verdict(ledger));
    const detail = [verdict(ledger), ...ledgerLines(ledger)].join('\n');
    assert.equal(ledger.lost, 0, detail);
    assert.equal(ledger.extraEffects, 0, detail);
  });

  it('an instance frozen past its session, at-least-once: 0 lost, at most a chunk twice per hand-over', {
    timeout: 300_000,
  }, async (t) => {
    const ledger = await nodeFreeze(t, client, 'at-least-once', sizes, (line) => t.diagnostic(line));
    t.diagnostic(verdict(ledger));
    const detail = [verdict(ledger), ...ledgerLines(ledger)].join('\n');
    assert.equal(ledger.lost, 0, detail);
    assert.equal(ledger.allowedExtra, NODE_AT_LEAST_ONCE_FREEZE_EXTRA_ALLOWED, detail);
    assert.ok(ledger.extraEffects <= NODE_AT_LEAST_ONCE_FREEZE_EXTRA_ALLOWED, detail);
  });

  it('its private broker restarted mid-run: 0 lost, at most a chunk twice', {
    timeout: 600_000,
  }, async (t) => {
    const ledger = await brokerRestart(t, client, sizes, (line) => t.diagnostic(line));
    t.diagnostic(verdict(ledger));
    const detail = [verdict(ledger), ...ledgerLines(ledger)].join('\n');
    assert.equal(ledger.lost, 0, detail);
    assert.ok(ledger.extraEffects <= ledger.allowedExtra, detail);
  });
});
