/**
 * The @platformatic/kafka implementation of the Kafka port (src/kafka/platformatic) against the test broker:
 * what is specific to it (its own batch-driven fetch loop, pause/resume per partition, transactions whose
 * offsets carry the group's generation), beside the suites that run the node, the adapter, the changelog and the
 * `kafka` repository on it (IDEM_KAFKA_CLIENT=platformatic).
 */
import assert from 'node:assert/strict';
import { tracingChannel } from 'node:diagnostics_channel';
import { describe, it, type TestContext } from 'node:test';
import { Connection, Consumer as LibraryConsumer, ProtocolError } from '@platformatic/kafka';
import { REQUIRE_STABLE } from '../../src/kafka/platformatic/consumer.js';
import { createClient } from '../../src/kafka/platformatic/index.js';
import type {
  ConsumedBatch,
  GroupConsumer,
  GroupJoin,
  KafkaClient,
  KafkaLogSink,
  KafkaProducer,
} from '../../src/kafka/port/index.js';
import { onCleanup, randomName, waitFor } from '../helpers/kafka.js';
import { endpoints, skipUnlessEnabled } from '../helpers/stores.js';
import { committedValues as readCommittedValues } from './port-contract/testbed.js';

async function client(t: TestContext, logger?: KafkaLogSink): Promise<KafkaClient> {
  const c = await createClient(
    {
      brokers: [...endpoints.kafkaBrokers],
      clientId: 'idem-test-platformatic',
      ssl: false,
      connectionTimeout: 5_000,
      requestTimeout: 30_000,
    },
    { retries: 5, ...(logger === undefined ? {} : { logger }) },
  );
  onCleanup(t, () => c.close());
  return c;
}

/** A log sink that keeps the warnings (fields and message). */
function warnings(): KafkaLogSink & {
  readonly warned: { fields: Record<string, unknown>; message: string }[];
} {
  const warned: { fields: Record<string, unknown>; message: string }[] = [];
  const ignore = () => undefined;
  return {
    warned,
    warn: (fields, message) => warned.push({ fields: fields as Record<string, unknown>, message }),
    error: ignore,
    info: ignore,
    debug: ignore,
  };
}

async function topic(t: TestContext, c: KafkaClient, partitions = 3): Promise<string> {
  const admin = c.admin();
  await admin.connect();
  const name = randomName('idem-plt');
  assert.equal(await admin.createTopics([{ topic: name, numPartitions: partitions }]), true);
  onCleanup(t, async () => {
    await admin.deleteTopics([name]);
    await admin.disconnect();
  });
  return name;
}

async function producer(t: TestContext, c: KafkaClient, transactionalId?: string): Promise<KafkaProducer> {
  const p = c.producer(
    transactionalId === undefined ? {} : { transactionalId, transactionTimeoutMs: 30_000 },
  );
  await p.connect();
  onCleanup(t, () => p.disconnect());
  return p;
}

async function member(
  t: TestContext,
  c: KafkaClient,
  groupId: string,
  input: string,
  extra: Record<string, unknown> = {},
): Promise<GroupConsumer> {
  const consumer = c.consumer({ groupId, sessionTimeoutMs: 10_000, maxWaitMs: 200, extra });
  await consumer.connect();
  await consumer.subscribe([input], true);
  onCleanup(t, () => consumer.disconnect());
  return consumer;
}

/** The API keys of the requests the tests below hold or refuse. */
const INIT_PRODUCER_ID = 22;
const ADD_PARTITIONS_TO_TXN = 24;
const ADD_OFFSETS_TO_TXN = 25;

/** A request {@link interceptRequests} stopped: resolved when it reached the connection; `release` sends it on. */
interface Intercepted {
  readonly reached: Promise<void>;
  release(): void;
}

/**
 * Intercepts requests of this process's library connections, one at a time per rule: `hold` keeps the next request
 * of an API until released (then sends it to the broker), `refuse` answers it with `error` without sending it.
 */
function interceptRequests(t: TestContext) {
  type Send = (this: Connection, apiKey: number, ...rest: unknown[]) => unknown;
  const original = Connection.prototype.send as unknown as Send;
  const rules = new Map<number, (connection: Connection, rest: unknown[]) => void>();
  (Connection.prototype as unknown as { send: Send }).send = function (apiKey, ...rest) {
    const rule = rules.get(apiKey);
    if (rule === undefined) return original.call(this, apiKey, ...rest);
    rules.delete(apiKey);
    rule(this, rest);
    return undefined;
  };
  t.after(() => {
    (Connection.prototype as unknown as { send: Send }).send = original;
  });
  const rule = (apiKey: number, act: (send: () => void, answer: (error: Error) => void) => void) => {
    const { promise: reachedOnce, resolve: reached } = Promise.withResolvers<void>();
    const { promise: released, resolve: release } = Promise.withResolvers<void>();
    rules.set(apiKey, (connection, rest) => {
      const callback = rest[rest.length - 1] as (error: Error | null) => void;
      act(
        () => {
          reached();
          void released.then(() => original.call(connection, apiKey, ...rest));
        },
        (error) =>
          process.nextTick(() => {
            callback(error);
            reached();
          }),
      );
    });
    return { reached: reachedOnce, release } satisfies Intercepted;
  };
  return {
    hold: (apiKey: number) => rule(apiKey, (send) => send()),
    refuse: (apiKey: number, error: Error) => rule(apiKey, (_send, answer) => answer(error)),
  };
}

/** The broker error names (`apiId`) in an error's causes and aggregated errors. */
function brokerErrorNames(error: unknown): string[] {
  const names: string[] = [];
  const queue = [error];
  for (let e = queue.shift(); e !== undefined; e = queue.shift()) {
    if (e === null || typeof e !== 'object') continue;
    const { apiId, errors, cause } = e as { apiId?: unknown; errors?: unknown; cause?: unknown };
    if (typeof apiId === 'string') names.push(apiId);
    if (Array.isArray(errors)) queue.push(...errors);
    if (cause !== undefined) queue.push(cause);
  }
  return names;
}

/** Resolves once `predicate` holds, checking every 20 ms (the test's own timeout bounds the wait). */
async function until(predicate: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await predicate())) await new Promise((resolve) => setTimeout(resolve, 20));
}

/** The records of `topic` a read_committed reader sees, per partition, as values (the port contract's reader). */
async function committedValues(c: KafkaClient, name: string): Promise<Map<number, string[]>> {
  const reader = c.partitionReader();
  const admin = c.admin();
  await admin.connect();
  try {
    return await readCommittedValues(reader, admin, name);
  } finally {
    await admin.disconnect();
    await reader.close();
  }
}

describe('@platformatic/kafka port implementation', { skip: skipUnlessEnabled('kafka') }, () => {
  it('admin: creates once, lists partitions, offsets and a group without commits', async (t) => {
    const c = await client(t);
    const name = await topic(t, c);
    const admin = c.admin();
    await admin.connect();
    onCleanup(t, () => admin.disconnect());
    assert.equal(await admin.createTopics([{ topic: name, numPartitions: 3 }]), false);
    assert.deepEqual(await admin.topicPartitions(name), [0, 1, 2]);
    assert.ok((await admin.listTopics()).includes(name));
    const p = await producer(t, c);
    const sent = await p.send({
      topic: name,
      messages: [
        { value: 'a', partition: 1 },
        { value: 'b', partition: 1 },
      ],
    });
    assert.deepEqual(sent, [{ topic: name, partition: 1, baseOffset: '0' }]);
    assert.deepEqual(await admin.topicOffsets(name), [
      { partition: 0, low: '0', high: '0' },
      { partition: 1, low: '0', high: '2' },
      { partition: 2, low: '0', high: '0' },
    ]);
    await admin.deleteRecords(name, [1]);
    assert.equal((await admin.topicOffsets(name))[1]?.low, '2');
    assert.deepEqual(await admin.groupOffsets(randomName('idem-plt-group'), name), [
      { partition: 0, offset: '-1' },
      { partition: 1, offset: '-1' },
      { partition: 2, offset: '-1' },
    ]);
    const configs = await admin.describeTopicConfigs(name, ['cleanup.policy']);
    assert.equal(configs.get('cleanup.policy'), 'delete');
  });

  it('consumes in partition batches, in order, and commits what the handler commits', async (t) => {
    const c = await client(t);
    const name = await topic(t, c);
    const p = await producer(t, c);
    for (const partition of [0, 1, 2]) {
      await p.send({
        topic: name,
        messages: Array.from({ length: 50 }, (_, i) => ({
          key: `k${i}`,
          value: `${partition}-${i}`,
          partition,
          headers: { h: 'x', two: ['a', 'b'] },
        })),
      });
    }
    const groupId = randomName('idem-plt-group');
    const consumer = await member(t, c, groupId, name);
    const seen = new Map<number, string[]>();
    const joins: GroupJoin[] = [];
    consumer.onGroupJoin((join) => joins.push(join));
    await consumer.run({
      partitionsConsumedConcurrently: 3,
      eachBatch: async (batch: ConsumedBatch) => {
        const list = seen.get(batch.partition) ?? [];
        for (const m of batch.messages) {
          list.push(String(m.value));
          assert.equal(String(m.headers.h), 'x');
          assert.deepEqual(m.headers.two?.toString(), 'a,b');
          batch.resolveOffset(m.offset);
        }
        seen.set(batch.partition, list);
        await batch.commit(String(BigInt(batch.lastOffset()) + 1n));
      },
    });
    await until(() => [0, 1, 2].every((partition) => (seen.get(partition)?.length ?? 0) === 50));
    for (const partition of [0, 1, 2]) {
      assert.deepEqual(
        seen.get(partition),
        Array.from({ length: 50 }, (_, i) => `${partition}-${i}`),
      );
    }
    assert.deepEqual(joins[0]?.assignment, { [name]: [0, 1, 2] });
    assert.equal(consumer.groupMetadata().generationId, joins[joins.length - 1]?.generationId);
    const admin = c.admin();
    await admin.connect();
    onCleanup(t, () => admin.disconnect());
    await until(async () => (await admin.groupOffsets(groupId, name)).every((o) => o.offset === '50'));
  });

  it('a rejected batch is read again from the commit, with a warning; a paused partition waits for resume', async (t) => {
    const log = warnings();
    const c = await client(t, log);
    const name = await topic(t, c, 2);
    const p = await producer(t, c);
    await p.send({
      topic: name,
      messages: [
        { value: 'a0', partition: 0 },
        { value: 'b0', partition: 1 },
      ],
    });
    const consumer = await member(t, c, randomName('idem-plt-group'), name);
    consumer.pause([{ topic: name, partitions: [1] }]);
    const seen: string[] = [];
    let failOnce = true;
    await consumer.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch) => {
        if (failOnce) {
          failOnce = false;
          throw new Error('first try fails');
        }
        for (const m of batch.messages) {
          seen.push(String(m.value));
          batch.resolveOffset(m.offset);
        }
        await batch.commit(String(BigInt(batch.lastOffset()) + 1n));
      },
    });
    await until(() => seen.length === 1);
    assert.deepEqual(seen, ['a0']);
    // The warning carries the error under pino's key (under `error` it was logged as `{}`).
    const failed = log.warned.find((w) => w.message.startsWith('a batch failed'));
    assert.equal((failed?.fields.err as Error | undefined)?.message, 'first try fails');
    // Partition 1 stays paused however long partition 0 keeps fetching.
    await p.send({ topic: name, messages: [{ value: 'a1', partition: 0 }] });
    await until(() => seen.length === 2);
    assert.deepEqual(seen, ['a0', 'a1']);
    consumer.resume([{ topic: name, partitions: [1] }]);
    await until(() => seen.length === 3);
    assert.deepEqual(seen, ['a0', 'a1', 'b0']);
  });

  it('a transaction commits its records and its offsets together, and an abort leaves neither', async (t) => {
    const c = await client(t);
    const input = await topic(t, c, 1);
    const output = await topic(t, c, 1);
    const groupId = randomName('idem-plt-group');
    const consumer = await member(t, c, groupId, input);
    let joined = false;
    consumer.onGroupJoin(() => {
      joined = true;
    });
    await consumer.run({ partitionsConsumedConcurrently: 1, eachBatch: async () => undefined });
    await until(() => joined);
    const tp = await producer(t, c, randomName('idem-plt-txn'));
    const aborted = await tp.transaction();
    await aborted.send({ topic: output, messages: [{ value: 'aborted', partition: 0 }] });
    await aborted.sendOffsets({
      group: consumer,
      topics: [{ topic: input, partitions: [{ partition: 0, offset: '7' }] }],
    });
    await aborted.abort();
    assert.equal(aborted.isActive(), false);
    const committed = await tp.transaction();
    await committed.send({ topic: output, messages: [{ value: 'committed', partition: 0 }] });
    await committed.sendOffsets({
      group: consumer,
      topics: [{ topic: input, partitions: [{ partition: 0, offset: '3' }] }],
    });
    await committed.commit();
    assert.deepEqual((await committedValues(c, output)).get(0), ['committed']);
    const admin = c.admin();
    await admin.connect();
    onCleanup(t, () => admin.disconnect());
    assert.deepEqual(await admin.groupOffsets(groupId, input), [{ partition: 0, offset: '3' }]);
  });

  it('a prepared transaction registers its partitions and group in one step, then only sends and commits', async (t) => {
    const c = await client(t);
    const input = await topic(t, c, 1);
    const output = await topic(t, c, 2);
    const changelog = await topic(t, c, 2);
    const groupId = randomName('idem-plt-group');
    const consumer = await member(t, c, groupId, input);
    let joined = false;
    consumer.onGroupJoin(() => {
      joined = true;
    });
    await consumer.run({ partitionsConsumedConcurrently: 1, eachBatch: async () => undefined });
    await until(() => joined);
    const tp = await producer(t, c, randomName('idem-plt-txn'));
    // The library traces each transaction request it sends (none when a partition or group is known already).
    const operations: string[] = [];
    const trace = tracingChannel('plt:kafka:producer:transactions');
    const onStart = (context: unknown) => {
      operations.push((context as { operation: string }).operation);
    };
    trace.start.subscribe(onStart);
    t.after(() => trace.start.unsubscribe(onStart));
    const tx = await tp.transaction();
    assert.ok(tx.prepare, 'a platformatic transaction can be prepared');
    await tx.prepare({
      partitions: [
        { topic: output, partitions: [1] },
        { topic: changelog, partitions: [1] },
      ],
      groupId,
    });
    const prepared = operations.splice(0);
    assert.deepEqual(prepared.filter((o) => o !== 'begin').sort(), [
      'addOffsetsToTransaction',
      'addPartitions',
    ]);
    await tx.send({ topic: output, messages: [{ value: 'out', partition: 1 }] });
    await tx.send({ topic: changelog, messages: [{ value: 'mark', partition: 1 }] });
    await tx.sendOffsets({
      group: consumer,
      topics: [{ topic: input, partitions: [{ partition: 0, offset: '5' }] }],
    });
    await tx.commit();
    assert.deepEqual(operations, ['commitOffset', 'commit'], 'nothing registered twice');
    assert.deepEqual((await committedValues(c, output)).get(1), ['out']);
    assert.deepEqual((await committedValues(c, changelog)).get(1), ['mark']);
    const admin = c.admin();
    await admin.connect();
    onCleanup(t, () => admin.disconnect());
    assert.deepEqual(await admin.groupOffsets(groupId, input), [{ partition: 0, offset: '5' }]);
  });

  it('the group fences a zombie: offsets sent with an old generation are refused (KIP-447)', async (t) => {
    const c = await client(t);
    const input = await topic(t, c, 2);
    const groupId = randomName('idem-plt-group');
    const first = await member(t, c, groupId, input);
    const firstJoins: GroupJoin[] = [];
    first.onGroupJoin((join) => firstJoins.push(join));
    await first.run({ partitionsConsumedConcurrently: 1, eachBatch: async () => undefined });
    await until(() => firstJoins.length > 0);
    const old = first.groupMetadata();
    assert.equal(typeof old.generationId, 'number');
    // A second member joins: the group moves to a newer generation; `old` is what a zombie would still send.
    const second = await member(t, c, groupId, input);
    const secondJoins: GroupJoin[] = [];
    second.onGroupJoin((join) => secondJoins.push(join));
    await second.run({ partitionsConsumedConcurrently: 1, eachBatch: async () => undefined });
    await until(() => secondJoins.length > 0 && firstJoins.length > 1);
    const tp = await producer(t, c, randomName('idem-plt-txn'));
    const zombie = await tp.transaction();
    const stale = { groupMetadata: () => old };
    await assert.rejects(
      zombie.sendOffsets({
        group: stale,
        topics: [{ topic: input, partitions: [{ partition: 0, offset: '1' }] }],
      }),
      (error: unknown) => c.errors.isFenced(error),
    );
    await zombie.abort().catch(() => undefined);
    // The member itself refuses a partition it no longer owns in its current generation.
    const owned = firstJoins[firstJoins.length - 1]?.assignment[input] ?? [];
    const notOwned = [0, 1].find((partition) => !owned.includes(partition));
    assert.notEqual(notOwned, undefined);
    const tx = await tp.transaction();
    await assert.rejects(
      tx.sendOffsets({
        group: first,
        topics: [{ topic: input, partitions: [{ partition: notOwned as number, offset: '1' }] }],
      }),
      (error: unknown) => c.errors.isFenced(error),
    );
    await tx.abort().catch(() => undefined);
  });

  it('a heartbeat sent with the generation the group just left is a rebalance, not a fence', async (t) => {
    // The library has joined the next generation (JoinGroup and SyncGroup answered) but the port has not heard of
    // it yet: a batch of the old generation heartbeats with the old id, and the coordinator answers
    // ILLEGAL_GENERATION. Under load that window is real (a heartbeat sent a few ms before the join event); here
    // the member's join event is held back so the heartbeat always falls in it.
    const c = await client(t);
    const input = await topic(t, c, 2);
    const p = await producer(t, c);
    for (const partition of [0, 1]) await p.send({ topic: input, messages: [{ value: 'v', partition }] });
    const groupId = randomName('idem-plt-group');
    const first = await member(t, c, groupId, input);
    let batchInHand: ConsumedBatch | undefined;
    let finish = () => {};
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    onCleanup(t, () => finish());
    await first.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch) => {
        batchInHand ??= batch;
        if (batchInHand === batch) await finished;
      },
    });
    await waitFor(() => batchInHand !== undefined, { what: 'the first member in a batch' });
    const { memberId, generationId } = first.groupMetadata();

    const held: (() => void)[] = [];
    const emit = LibraryConsumer.prototype.emit;
    LibraryConsumer.prototype.emit = function (
      this: LibraryConsumer,
      event: string | symbol,
      ...args: unknown[]
    ) {
      if (event === 'consumer:group:join' && (args[0] as { memberId?: string }).memberId === memberId) {
        held.push(() => emit.call(this, event, ...args));
        return true;
      }
      return emit.call(this, event, ...args);
    };
    const release = () => {
      LibraryConsumer.prototype.emit = emit;
      for (const join of held.splice(0)) join();
    };
    onCleanup(t, release);
    const second = await member(t, c, groupId, input);
    await second.run({ partitionsConsumedConcurrently: 1, eachBatch: async () => undefined });
    await waitFor(() => held.length > 0, { what: 'the first member to join the next generation' });
    assert.equal(first.groupMetadata().generationId, generationId, 'the port has not heard of the join');

    let rejection: unknown;
    await waitFor(
      async () => {
        // At most one Heartbeat per interval: the ones between resolve at once.
        rejection = await batchInHand?.heartbeat().then(
          () => undefined,
          (error: unknown) => error,
        );
        return rejection !== undefined;
      },
      { what: 'the batch heartbeat to be refused' },
    );
    release();
    const said = String((rejection as Error).message);
    assert.deepEqual(brokerErrorNames(rejection), ['ILLEGAL_GENERATION'], said);
    assert.equal(c.errors.isFenced(rejection), false, said);
    assert.equal(c.errors.isBrokerUnreachable(rejection), false, said);
    // The log names what the coordinator said.
    assert.match(said, /ILLEGAL_GENERATION/);
    assert.equal(batchInHand?.isStale(), true);
  });

  it('with requireStable, a new member waits for an open transaction holding offsets, then starts after them', async (t) => {
    const c = await client(t);
    const input = await topic(t, c, 1);
    const p = await producer(t, c);
    await p.send({
      topic: input,
      messages: Array.from({ length: 10 }, (_, i) => ({ value: `v${i}`, partition: 0 })),
    });
    const groupId = randomName('idem-plt-group');
    // An earlier member of the group: its transaction takes the offset to 6 and stays open for now.
    const earlier = await member(t, c, groupId, input);
    let joined = false;
    earlier.onGroupJoin(() => {
      joined = true;
    });
    await earlier.run({ partitionsConsumedConcurrently: 1, eachBatch: async () => undefined });
    await until(() => joined);
    const tp = await producer(t, c, randomName('idem-plt-txn'));
    const open = await tp.transaction();
    await open.sendOffsets({
      group: earlier,
      topics: [{ topic: input, partitions: [{ partition: 0, offset: '6' }] }],
    });
    await earlier.disconnect();
    const later = await member(t, c, groupId, input, { [REQUIRE_STABLE]: true });
    const first: string[] = [];
    await later.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async (batch) => {
        if (first.length === 0) first.push(batch.messages[0]?.offset as string);
      },
    });
    // Without requireStable the position would be read now (no commit yet: the start, offset 0).
    await open.commit();
    await until(() => first.length > 0);
    assert.deepEqual(first, ['6']);
  });

  it('a transaction whose begin failed leaves the producer able to begin the next one', async (t) => {
    const c = await client(t);
    const output = await topic(t, c, 1);
    const tp = await producer(t, c, randomName('idem-plt-txn'));
    // A send outside a transaction makes the library forget the transactional producer id: the next begin sends
    // InitProducerId again, and that one is refused here (as FindCoordinator is while a broker is away).
    await tp.send({ topic: output, messages: [{ value: 'plain', partition: 0 }] });
    const refused = interceptRequests(t).refuse(
      INIT_PRODUCER_ID,
      new ProtocolError('TRANSACTIONAL_ID_AUTHORIZATION_FAILED'),
    );
    await assert.rejects(tp.transaction(), (error: unknown) =>
      brokerErrorNames(error).includes('TRANSACTIONAL_ID_AUTHORIZATION_FAILED'),
    );
    await refused.reached;
    // The library kept the failed begin's transaction as its active one: every begin failed from then on.
    const tx = await tp.transaction();
    await tx.send({ topic: output, messages: [{ value: 'after', partition: 0 }] });
    await tx.commit();
    assert.deepEqual((await committedValues(c, output)).get(0), ['plain', 'after']);
  });

  it('a transactional producer whose connect failed leaves no broker connection open', async (t) => {
    const c = await client(t);
    await topic(t, c, 1);
    const sockets = () => process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
    const open = sockets();
    const refused = interceptRequests(t).refuse(
      INIT_PRODUCER_ID,
      new ProtocolError('TRANSACTIONAL_ID_AUTHORIZATION_FAILED'),
    );
    const tp = c.producer({ transactionalId: randomName('idem-plt-txn'), transactionTimeoutMs: 30_000 });
    await assert.rejects(tp.connect(), (error: unknown) =>
      brokerErrorNames(error).includes('TRANSACTIONAL_ID_AUTHORIZATION_FAILED'),
    );
    await refused.reached;
    // The library producer the failed connect made was never handed out: only it could close its connections.
    await waitFor(() => sockets() <= open, {
      timeoutMs: 10_000,
      what: `the failed producer's connections closed (${open} open before, ${sockets()} now)`,
    });
  });

  it('a prepare one of whose requests failed settles only after the other', async (t) => {
    const c = await client(t);
    const output = await topic(t, c, 1);
    const groupId = randomName('idem-plt-group');
    const tp = await producer(t, c, randomName('idem-plt-txn'));
    const tx = await tp.transaction();
    assert.ok(tx.prepare);
    // AddPartitionsToTxn waits before it is sent; AddOffsetsToTxn is refused at once.
    const requests = interceptRequests(t);
    const held = requests.hold(ADD_PARTITIONS_TO_TXN);
    const refused = requests.refuse(ADD_OFFSETS_TO_TXN, new ProtocolError('GROUP_AUTHORIZATION_FAILED'));
    let settled = false;
    const prepared = tx.prepare({ partitions: [{ topic: output, partitions: [0] }], groupId });
    prepared.then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    await Promise.all([held.reached, refused.reached]);
    // Every callback and promise job of the refusal has run by the next turn of the event loop.
    await new Promise((resolve) => setImmediate(resolve));
    // Settled now, the held request would go on alone, and the library would hand its answer to the next
    // transaction's AddPartitionsToTxn (it shares a request in flight by name), registering nothing for it.
    assert.equal(settled, false, 'prepare waits for the request still in flight');
    held.release();
    await assert.rejects(prepared, /GROUP_AUTHORIZATION_FAILED/);
    await tx.abort();
  });

  it('a newer transactional producer of the same id fences the older one', async (t) => {
    const c = await client(t);
    const output = await topic(t, c, 1);
    const id = randomName('idem-plt-txn');
    const older = await producer(t, c, id);
    const tx = await older.transaction();
    await tx.send({ topic: output, messages: [{ value: 'old', partition: 0 }] });
    await producer(t, c, id);
    await assert.rejects(tx.commit(), (error: unknown) => c.errors.isFenced(error));
    assert.deepEqual((await committedValues(c, output)).get(0), []);
  });
});
