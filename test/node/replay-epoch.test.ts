import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { Message } from 'kafkajs';
import type { DuplicateAuditValue } from '../../src/node/duplicates.js';
import {
  consumeAll,
  endOffsets,
  produce,
  randomName,
  resetGroupToStart,
  testProducer,
  waitForCommitted,
} from '../helpers/kafka.js';
import {
  nodeConfig,
  nodeTestbed,
  redisRepository,
  rocksdbRepository,
  startNodeInProcess,
} from '../helpers/node.js';
import { skipUnlessEnabled } from '../helpers/stores.js';

// Issue 36 §3 on the node: `[dedup] replayEpoch`. After the group's offsets are reset on purpose, a run with a new
// epoch forwards each id once more (its duplicates still dropped); a run with the same epoch forwards nothing.

const UNIQUE = 30;

/** 40 records: 30 uids, 10 of them twice (keyed by uid, so both copies share a partition). */
function input(): Message[] {
  const messages: Message[] = [];
  for (let i = 0; i < UNIQUE; i++) {
    const uid = `u-${i}`;
    messages.push({ key: uid, value: JSON.stringify({ uid, copy: 1 }) });
    if (i % 3 === 0) messages.push({ key: uid, value: JSON.stringify({ uid, copy: 2 }) });
  }
  return messages;
}

const STORES = {
  redis: (t: TestContext) => redisRepository(t, randomName('idem-node-replay')),
  rocksdb: rocksdbRepository,
} as const;

describe('dedup node, dedup.replayEpoch (issue 36 §3)', { skip: skipUnlessEnabled('kafka') }, () => {
  for (const [store, repository] of Object.entries(STORES)) {
    const skip = store === 'redis' ? skipUnlessEnabled('redis') : false;
    it(`${store}${store === 'rocksdb' ? ' with the changelog' : ''}: a new epoch over reset offsets forwards each id once more`, {
      skip,
      timeout: 240_000,
    }, async (t) => {
      const { kafka, admin, topic, output, dlq, groupId } = await nodeTestbed(t, { partitions: 2 });
      const audit = randomName('idem-node-replay-dups');
      t.after(() =>
        admin.deleteTopics({ topics: [audit, `${groupId}-${output}-changelog`] }).catch(() => undefined),
      );
      const messages = input();
      await produce(await testProducer(t, kafka), topic, messages);
      const table = await repository(t);

      /** One run of the node over the whole input; the uids it forwarded in this run. */
      async function run(replayEpoch?: string): Promise<string[]> {
        const config = nodeConfig({
          topic,
          groupId,
          output,
          dlq,
          repository: table,
          extra: {
            dedup: replayEpoch === undefined ? {} : { replayEpoch },
            output: { duplicatesTopic: audit },
            ...(store === 'rocksdb' ? { changelog: { enabled: true } } : {}),
          },
        });
        const before = await endOffsets(admin, output);
        const node = await startNodeInProcess(t, config);
        await waitForCommitted(admin, groupId, topic, { timeoutMs: 90_000 });
        await node.handle.stop();
        const records = await consumeAll(kafka, output, { timeoutMs: 60_000 });
        const uids = records
          .filter((r) => r.offset >= (before.get(r.partition) ?? 0))
          .map((r) => (JSON.parse(r.value?.toString() ?? '') as { uid: string }).uid);
        return uids.sort();
      }

      const all = Array.from({ length: UNIQUE }, (_, i) => `u-${i}`).sort();
      assert.deepEqual(await run(), all, 'no epoch: each uid once');
      await resetGroupToStart(admin, groupId, topic);
      assert.deepEqual(await run(), [], 'the same (no) epoch over reset offsets: nothing forwarded');
      await resetGroupToStart(admin, groupId, topic);
      assert.deepEqual(await run('fix-1'), all, 'a new epoch: each uid exactly once more');
      await resetGroupToStart(admin, groupId, topic);
      assert.deepEqual(await run('fix-1'), [], 'the replay epoch again: nothing forwarded');

      // Audit records name the record's own uid, never the epoch's store id: 10 + 40 + 10 + 40 duplicates.
      const audited = (await consumeAll(kafka, audit)).map(
        (r) => (JSON.parse(r.value?.toString() ?? '') as DuplicateAuditValue).id,
      );
      assert.equal(audited.length, 100);
      assert.ok(
        audited.every((id) => /^u-\d+$/.test(id)),
        `audited ids are uids: ${audited.slice(0, 3).join(', ')}`,
      );
    });
  }
});
