import assert from 'node:assert/strict';
import { existsSync, readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { kafkaLib } from './private-broker.js';

// Issue 20 §3: where a broker already answers at KAFKA_BROKERS the stack reuses it and fetches no jars, so the
// private-broker tests found none. They fetch them now.
describe('the private broker finds its jars', { skip: skipUnlessEnabled('kafka') }, () => {
  it('fetches the Kafka jars into an empty stack dir, and finds them there the next time', {
    timeout: 600_000,
  }, async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'idem-empty-stack-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const lib = await kafkaLib([dir]);
    assert.equal(lib, join(dir, 'kafka', 'lib'));
    const jars = readdirSync(lib);
    assert.ok(
      jars.some((name) => /^kafka_2\.13-.*\.jar$/.test(name)),
      `the broker's jar is there: ${jars.join(' ')}`,
    );
    assert.ok(existsSync(join(lib, '.resolved')), 'stamped as resolved');
    assert.equal(await kafkaLib([dir]), lib);
  });
});
