import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openKafkaClient } from '../../src/kafka/port/index.js';
import { onCleanup, testKafkaClientName, testProducer, waitFor } from '../helpers/kafka.js';
import { skipUnlessEnabled } from '../helpers/stores.js';
import { privateBrokerTestbed } from '../node/private-broker.js';

// Issue #32: after a broker restart, a ListOffsets call that started as the broker stopped kept its request, built
// with the leader epoch of before, and every retry got FENCED_LEADER_EPOCH from the restarted broker until the
// retry budget ran out (~2.5 minutes at the node's 20 retries): the node read nothing meanwhile. Offsets are read
// by the consumer's position read, the changelog reader and the admin; the last two are driven here, on a
// broker of the test's own (the restart must not touch the shared one).

const READS = 30;

describe('offset reads across a broker restart', { skip: skipUnlessEnabled('kafka') }, () => {
  it('every read in flight when the broker stopped ends soon after it is back', {
    timeout: 600_000,
  }, async (t) => {
    const { broker, kafka, topic } = await privateBrokerTestbed(t, 'idem-restart-offsets');
    const producer = await testProducer(t, kafka);
    const messages = Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, value: `v${i}` }));
    await producer.send({ topic, messages });
    const client = await openKafkaClient(
      {
        client: testKafkaClientName(),
        brokers: [...broker.brokers],
        clientId: 'idem-restart-offsets',
        ssl: false,
        connectionTimeout: 5_000,
        requestTimeout: 30_000,
      },
      // The node's budget (src/node/dedup-node.ts): long enough to outlast the restart.
      { retries: 20 },
    );
    onCleanup(t, () => client.close());
    const admin = client.admin();
    await admin.connect();
    onCleanup(t, () => admin.disconnect());
    const reader = client.partitionReader();
    onCleanup(t, () => reader.close());
    const partitions = await reader.partitions(topic);
    const total = (ends: Map<number, number>) => [...ends.values()].reduce((a, b) => a + b, 0);
    // Both paths have metadata (with the leader epochs of now) before the restart.
    assert.equal(total(await reader.listOffsets(topic, partitions, 'latest')), messages.length);
    assert.equal((await admin.topicOffsets(topic)).length, partitions.length);

    // Reads of either kind, one every 250 ms from the moment the broker starts stopping: some meet the shutdown,
    // the rest the outage.
    const read = (i: number): Promise<number> =>
      i % 2 === 0
        ? reader.listOffsets(topic, partitions, i % 4 === 0 ? 'latest' : 'earliest').then(total)
        : admin.topicOffsets(topic).then((ranges) => ranges.reduce((n, r) => n + Number(r.high), 0));
    const reads: { readonly expected: number; settled: boolean; error?: unknown; value?: number }[] = [];
    const pending: Promise<void>[] = [];
    const stopped = broker.stop();
    for (let i = 0; i < READS; i++) {
      const entry: (typeof reads)[number] = { expected: i % 4 === 2 ? 0 : messages.length, settled: false };
      reads.push(entry);
      pending.push(
        read(i).then(
          (value) => Object.assign(entry, { settled: true, value }),
          (error: unknown) => Object.assign(entry, { settled: true, error }),
        ) as Promise<never>,
      );
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    await stopped;
    const inFlight = reads.filter((r) => !r.settled).length;
    await broker.start();
    const back = Date.now();
    // ~30 s is what it takes with the fix (a retry's backoff is at most 10 s); 60 s leaves room for a loaded box.
    // Before it, on platformatic, 14 of 30 were still running 30 s after the broker was back.
    await waitFor(() => reads.every((r) => r.settled), {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: () =>
        `every offset read to end after the broker restart: ${reads.filter((r) => !r.settled).length} of ` +
        `${READS} still running ${Math.round((Date.now() - back) / 1000)} s after the broker was back`,
    });
    await Promise.all(pending);
    t.diagnostic(
      `${inFlight} of ${READS} reads in flight when the broker had stopped; all ended ` +
        `${Math.round((Date.now() - back) / 1000)} s after it was back`,
    );
    // Each read answers, with the right offsets: a read whose connection closed under it (the broker stopping) is
    // retried by the client like one sent while the broker was away, as any read of the port is.
    for (const [i, r] of reads.entries()) {
      assert.equal(r.error, undefined, `read ${i} failed: ${r.error}`);
      assert.equal(r.value, r.expected, `read ${i}`);
    }
  });
});
