import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startNodeProcess, writeNodeConfig } from '../helpers/node.js';

// Nothing listens on port 1: kafkajs keeps retrying its first connection (20 tries, up to 10 s apart).
const UNREACHABLE = '127.0.0.1:1';

describe('idem node stops while it is still connecting', () => {
  it('SIGTERM during kafkajs connection retries exits within shutdown.timeout, saying so', async (t) => {
    const path = await writeNodeConfig(t, {
      repository: { type: 'memory' },
      kafka: { brokers: [UNREACHABLE], connectionTimeout: '1s' },
      input: { topic: 'in' },
      output: { topic: 'out' },
      dlq: { topic: 'dlq' },
      dedup: { id: 'uid' },
      metrics: { enabled: false },
      shutdown: { timeout: '2s' },
    });
    const node = startNodeProcess(t, path);
    // The first failed attempt is logged: the node is inside kafkajs' retry loop.
    await node.waitForLog(
      (line) => line.kafkajs !== undefined && /ECONNREFUSED/.test(String(line.msg ?? '')),
    );
    node.child.kill('SIGTERM');
    // Liveness bound, not a timing claim: without the fix the node lived ~47 s past the signal.
    const exit = await Promise.race([node.exited, sleep(15_000).then(() => 'still running' as const)]);
    assert.notEqual(exit, 'still running', 'the node ignored SIGTERM while connecting');
    assert.deepEqual(exit, { code: 0, signal: null });
    assert.ok(
      node.logs.some(
        (line) =>
          line.msg === 'stop requested during start-up: giving up the connection attempts' &&
          line.signal === 'SIGTERM',
      ),
      JSON.stringify(node.logs.map((line) => line.msg)),
    );
    assert.ok(node.logs.some((line) => line.msg === 'stopped before the node started'));
  });
});
