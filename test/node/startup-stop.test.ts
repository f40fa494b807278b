import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { platformaticCannotRunHere } from '../helpers/kafka.js';
import { startNodeProcess, writeNodeConfig } from '../helpers/node.js';

// Nothing listens on port 1: kafkajs keeps retrying its first connection (20 tries, up to 10 s apart).
const UNREACHABLE = '127.0.0.1:1';

describe('idem node stops while it is still connecting', () => {
  it('SIGTERM during kafkajs connection retries exits within shutdown.timeout, saying so', async (t) => {
    const path = await writeNodeConfig(t, {
      repository: { type: 'memory' },
      // kafkajs by name: its retry loop is what once ignored SIGTERM (the default client is platformatic).
      kafka: { client: 'kafkajs', brokers: [UNREACHABLE], connectionTimeout: '1s' },
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

  it('an unreachable broker: gives up after kafka.startupTimeout with one line on stderr and exit 3', {
    skip: platformaticCannotRunHere(),
  }, async (t) => {
    const path = await writeNodeConfig(t, {
      repository: { type: 'memory' },
      kafka: { brokers: [UNREACHABLE], connectionTimeout: '1s', startupTimeout: '3s' },
      input: { topic: 'in' },
      output: { topic: 'out' },
      dlq: { topic: 'dlq' },
      dedup: { id: 'uid' },
      metrics: { enabled: false },
    });
    const node = startNodeProcess(t, path);
    // Liveness bound, not a timing claim: before, kafkajs retried for 160 s, one JSON line per attempt.
    const exit = await Promise.race([node.exited, sleep(30_000).then(() => 'still running' as const)]);
    assert.notEqual(exit, 'still running', 'the node kept retrying past kafka.startupTimeout');
    assert.deepEqual(exit, { code: 3, signal: null });
    const stderr = node.stderr
      .join('')
      .split('\n')
      .filter((line) => line !== '');
    assert.equal(stderr.length, 1, stderr.join('\n'));
    assert.match(
      stderr[0] ?? '',
      /^idem node: the Kafka brokers 127\.0\.0\.1:1 did not answer within 3s \(kafka\.startupTimeout\): .*ECONNREFUSED/,
    );
    // The retries themselves are not a log line each: the first failure is reported, the rest are debug.
    const failures = node.logs.filter((line) => /ECONNREFUSED/.test(String(line.msg ?? '')));
    assert.ok(failures.length <= 2, JSON.stringify(node.logs.map((line) => line.msg)));
  });

  it('kafka.startupTimeout is documented with its default', async () => {
    const { nodeConfigSchema } = await import('../../src/node/options.js');
    const parsed = nodeConfigSchema.parse({
      kafka: { brokers: ['b:9092'] },
      input: { topic: 'in' },
      output: { topic: 'out' },
      dlq: { topic: 'dlq' },
      dedup: { id: 'uid' },
    });
    assert.equal(parsed.kafka.startupTimeout, 30_000);
    const { readFile } = await import('node:fs/promises');
    const doc = await readFile(new URL('../../docs/node.md', import.meta.url), 'utf8');
    assert.match(doc, /`kafka\.startupTimeout` \| `30s`/);
  });
});
