import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it, type TestContext } from 'node:test';
import type { Message } from 'kafkajs';
import { type KafkaRecord, kafkaRecordId, runIdempotentConsumer } from '../../../src/adapters/kafka/index.js';
import { IdempotentConsumer } from '../../../src/consumer/index.js';
import { RedisRepository } from '../../../src/repositories/redis/index.js';
import {
  kafkaTestbed,
  onCleanup,
  onTestClient,
  produce,
  resetGroupToStart,
  testProducer,
  waitForCommitted,
} from '../../helpers/kafka.js';
import { endpoints, skipUnlessEnabled } from '../../helpers/stores.js';

// Issue 36 §3, deliberate replays: after the group's offsets are reset on purpose, a new `replayEpoch` runs each
// re-read id once more (duplicates within the replay still dropped); the same epoch runs nothing again.

const UNIQUE = 60;

/** 80 records: 60 ids, 20 of them repeated (10 right after the original, same key; 10 at the end, other keys). */
function input(): Message[] {
  const messages: Message[] = [];
  const late: Message[] = [];
  for (let i = 0; i < UNIQUE; i++) {
    const value = JSON.stringify({ id: `id-${i}` });
    messages.push({ key: `k${i}`, value });
    if (i % 3 === 0) {
      if (i % 6 === 0) messages.push({ key: `k${i}`, value });
      else late.push({ key: `other-${i}`, value });
    }
  }
  return [...messages, ...late];
}

describe('replayEpoch on the Kafka adapter', {
  skip: skipUnlessEnabled('kafka') || skipUnlessEnabled('redis'),
}, () => {
  it('a reset group re-reads: same epoch runs nothing, a new epoch runs each id once more', async (t: TestContext) => {
    const { kafka, admin, topic, groupId } = await kafkaTestbed(t);
    const messages = input();
    assert.equal(messages.length, 80);
    await produce(await testProducer(t, kafka), topic, messages);
    const repository = await RedisRepository.open({
      url: endpoints.redisUrl,
      keyPrefix: `idem-replay-epoch:${randomUUID()}:`,
    });
    onCleanup(t, async () => {
      await repository.clear();
      await repository.close();
    });

    /** One run of the group over the whole topic; the ids whose handler ran, and how many duplicates it dropped. */
    async function run(replayEpoch?: string) {
      const idempotent = new IdempotentConsumer<KafkaRecord>({
        repository,
        id: kafkaRecordId,
        onWarning: () => {},
        ...(replayEpoch === undefined ? {} : { replayEpoch }),
      });
      const handled: string[] = [];
      const runner = await runIdempotentConsumer(
        onTestClient({
          kafka,
          topics: [topic],
          groupId,
          fromBeginning: true,
          id: { from: 'value' as const, path: 'id' },
          idempotent,
          batchSize: 20,
          handler: (_record: KafkaRecord, context: { id: string | undefined }) => {
            handled.push(context.id as string);
          },
        }),
      );
      onCleanup(t, () => runner.stop());
      await waitForCommitted(admin, groupId, topic, { timeoutMs: 60_000 });
      await runner.stop();
      return { handled, duplicates: idempotent.stats.duplicate };
    }

    const all = Array.from({ length: UNIQUE }, (_, i) => `id-${i}`).sort();
    const first = await run();
    assert.deepEqual([...first.handled].sort(), all, 'no epoch: each id once');
    assert.equal(first.duplicates, 20);

    await resetGroupToStart(admin, groupId, topic);
    const again = await run();
    assert.deepEqual(again.handled, [], 'the same (no) epoch over reset offsets: nothing runs again');
    assert.equal(again.duplicates, messages.length);

    await resetGroupToStart(admin, groupId, topic);
    const replay = await run('fix-1');
    assert.deepEqual([...replay.handled].sort(), all, 'a new epoch: each id exactly once more');
    assert.equal(replay.duplicates, 20, 'duplicates within the replay are still dropped');

    await resetGroupToStart(admin, groupId, topic);
    const replayAgain = await run('fix-1');
    assert.deepEqual(replayAgain.handled, [], 'the replay epoch again: nothing runs');
  });
});
