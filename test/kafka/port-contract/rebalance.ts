import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { ConsumerCrash, GroupJoin, KafkaClientName } from '../../../src/kafka/port/index.js';
import { onCleanup, waitFor } from '../../helpers/kafka.js';
import { joined, portTestbed, runRecording, sendValues } from './testbed.js';

const sorted = (join: GroupJoin | undefined, topic: string) => [...(join?.assignment[topic] ?? [])].sort();

/** Group membership: joins, assignments, revocations, rebalances seen from a batch, crashes. */
export function rebalanceTests(name: KafkaClientName): void {
  it('onGroupJoin gives member id, generation and assignment as members join and leave', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 2 });
    const groupId = await bed.groupId();
    const first = await bed.member(groupId, [topic]);
    const a = await runRecording(first);
    const alone = await joined(a, 'the first member to join');
    assert.equal(typeof alone.memberId, 'string');
    assert.notEqual(alone.memberId, '');
    assert.deepEqual(sorted(alone, topic), [0, 1]);
    assert.equal(first.groupMetadata().groupId, groupId);
    assert.equal(first.groupMetadata().memberId, alone.memberId);
    if (bed.client.capabilities.fencesByGroup) {
      // The group fences by generation: the member knows it, and sends what it joined with.
      assert.equal(typeof alone.generationId, 'number');
      assert.equal(first.groupMetadata().generationId, alone.generationId);
    }

    // A second member: the first loses a partition (revoked: missing from its new assignment).
    const second = await bed.member(groupId, [topic]);
    const b = await runRecording(second);
    await waitFor(() => b.joins.length > 0 && a.joins.length > 1, {
      what: 'the rebalance for the second member',
    });
    const split = a.joins[a.joins.length - 1];
    const other = b.joins[b.joins.length - 1];
    assert.equal(sorted(split, topic).length, 1);
    assert.equal(sorted(other, topic).length, 1);
    assert.deepEqual([...sorted(split, topic), ...sorted(other, topic)].sort(), [0, 1]);
    assert.equal(split?.memberId, alone.memberId);
    assert.notEqual(other?.memberId, alone.memberId);
    if (alone.generationId !== undefined) {
      assert.ok((split?.generationId ?? 0) > alone.generationId, 'a rebalance starts a newer generation');
      assert.equal(split?.generationId, other?.generationId);
      assert.equal(first.groupMetadata().generationId, split?.generationId);
    }

    // The second one leaves: the first gets both partitions back, in a newer generation again.
    const joinsBefore = a.joins.length;
    await second.disconnect();
    await waitFor(
      () => a.joins.length > joinsBefore && sorted(a.joins[a.joins.length - 1], topic).length === 2,
      {
        what: 'the rebalance after the second member left',
      },
    );
    const back = a.joins[a.joins.length - 1];
    if (split?.generationId !== undefined) assert.ok((back?.generationId ?? 0) > split.generationId);
  });

  it('a batch in hand learns of a rebalance: heartbeat() rejects, not as fenced', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 2 });
    const producer = await bed.producer();
    await sendValues(producer, topic, 0, ['a']);
    await sendValues(producer, topic, 1, ['b']);
    const groupId = await bed.groupId();
    const first = await bed.member(groupId, [topic]);
    let stop = false;
    onCleanup(t, () => {
      stop = true;
    });
    let rejection: unknown;
    /** Heartbeats that could not reach the coordinator (a loaded machine can time one out): the batch goes on. */
    const unreachable: string[] = [];
    let inBatch = false;
    await first.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch) => {
        if (rejection !== undefined) return;
        inBatch = true;
        // A long batch keeps the member in the group with heartbeats, until one says the group rebalances. A
        // rebalance answer classed as unreachable would keep this loop going, and the wait below would fail.
        while (!stop) {
          try {
            await batch.heartbeat();
          } catch (error) {
            if (bed.client.errors.isBrokerUnreachable(error) && unreachable.length < 20) {
              unreachable.push(describeError(error));
            } else {
              rejection = error;
              return;
            }
          }
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      },
    });
    await waitFor(() => inBatch, { what: 'the first member in a batch' });
    const second = await bed.member(groupId, [topic]);
    // The second member's join completes once the first rejoined (kafkajs rejoins after the batch returns).
    const secondRuns = second.run({ partitionsConsumedConcurrently: 1, eachBatch: async () => undefined });
    await waitFor(() => rejection !== undefined, {
      what: () =>
        `heartbeat() to reject during the rebalance (unreachable meanwhile: ${unreachable.join('; ')})`,
    });
    await secondRuns;
    // A rebalance is not a zombie's fate: the member rejoins and goes on (the port has no class of its own for it).
    const said = describeError(rejection);
    assert.equal(bed.client.errors.isFenced(rejection), false, said);
    assert.equal(bed.client.errors.isBrokerUnreachable(rejection), false, said);
  });

  it('onCrash reports a member that cannot join (session timeout out of the broker’s range), restart false', async (t) => {
    const bed = await portTestbed(t, name);
    const topic = await bed.topic({ partitions: 1 });
    // Below the broker's group.min.session.timeout.ms (6 s): JoinGroup answers INVALID_SESSION_TIMEOUT.
    const member = await bed.member(await bed.groupId(), [topic], {
      sessionTimeoutMs: 1_000,
      heartbeatIntervalMs: 300,
    });
    const crashes: ConsumerCrash[] = [];
    member.onCrash((crash) => crashes.push(crash));
    // run() resolves (the join goes on in the background on kafkajs); the refusal comes through onCrash.
    await member.run({ partitionsConsumedConcurrently: 1, eachBatch: async () => undefined });
    await waitFor(() => crashes.length > 0, { what: 'the crash', timeoutMs: 10_000 });
    assert.equal(crashes[0]?.restart, false);
    assert.equal(bed.client.errors.isPermanent(crashes[0]?.error), true);
  });
}

/** An error with its causes, for an assertion's message. */
function describeError(error: unknown): string {
  const parts: string[] = [];
  for (let e = error, depth = 0; e !== undefined && depth < 5; depth++) {
    const { name, message, code } = (e ?? {}) as { name?: string; message?: string; code?: unknown };
    parts.push(`${name ?? typeof e}${code === undefined ? '' : ` ${String(code)}`}: ${message ?? String(e)}`);
    e = (e as { cause?: unknown } | null)?.cause;
  }
  return parts.join(' <- ');
}
