/**
 * What every test of the Kafka port contract starts from: a client of the port under test, its connected admin,
 * and helpers that create topics, groups, producers and members with random names, each removed after the test
 * (see {@link onCleanup}: last created, first cleaned, so members leave before their topics go).
 */
import type { TestContext } from 'node:test';
import type { Admin } from 'kafkajs';
import {
  type ConsumedBatch,
  type ConsumedMessage,
  type GroupConsumer,
  type GroupConsumerOptions,
  type GroupJoin,
  type KafkaAdmin,
  type KafkaClient,
  type KafkaClientName,
  type KafkaProducer,
  openKafkaClient,
  type PartitionReader,
  type ProducerOptions,
} from '../../../src/kafka/port/index.js';
import {
  kafkaAdmin,
  onCleanup,
  randomGroupId,
  randomName,
  testConnection,
  waitFor,
} from '../../helpers/kafka.js';

/** Session timeout of members that must leave or be replaced quickly (the broker's minimum is 6 s). */
export const SHORT_SESSION_MS = 6_000;

export interface PortTestbed {
  readonly name: KafkaClientName;
  readonly client: KafkaClient;
  /** Connected; disconnected after the test. */
  readonly admin: KafkaAdmin;
  /** A new topic (2 partitions unless told), created through the port's admin, deleted after the test. */
  topic(options?: { partitions?: number; config?: Record<string, string> }): Promise<string>;
  /** A random group id; the group is deleted after the test (after its members left). */
  groupId(): Promise<string>;
  /** A connected producer, disconnected after the test. */
  producer(options?: ProducerOptions): Promise<KafkaProducer>;
  /** A connected member subscribed to `topics` from the beginning, disconnected after the test. */
  member(
    groupId: string,
    topics: readonly string[],
    options?: Partial<GroupConsumerOptions>,
  ): Promise<GroupConsumer>;
  /** A partition reader, closed after the test. */
  reader(): PartitionReader;
}

/** Opens the client `name` on the test broker and the rest of a {@link PortTestbed}. */
export async function portTestbed(t: TestContext, name: KafkaClientName): Promise<PortTestbed> {
  const client = await openKafkaClient(
    { ...testConnection(`idem-port-${name}`), client: name },
    { retries: 5 },
  );
  onCleanup(t, () => client.close());
  const admin = client.admin();
  await admin.connect();
  onCleanup(t, () => admin.disconnect());
  // Groups are deleted with kafkajs (the port's admin has no call for it): test instrumentation only.
  let groups: Admin | undefined;
  return {
    name,
    client,
    admin,
    async topic(options = {}) {
      const topic = randomName(`idem-port-${name}`);
      const configEntries = Object.entries(options.config ?? {}).map(([key, value]) => ({
        name: key,
        value,
      }));
      await admin.createTopics([{ topic, numPartitions: options.partitions ?? 2, configEntries }]);
      onCleanup(t, () => admin.deleteTopics([topic]).catch(() => undefined));
      return topic;
    },
    async groupId() {
      groups ??= await kafkaAdmin(t);
      return randomGroupId(t, groups, `idem-port-${name}`);
    },
    async producer(options = {}) {
      const producer = client.producer(options);
      await producer.connect();
      onCleanup(t, () => producer.disconnect());
      return producer;
    },
    async member(groupId, topics, options = {}) {
      const consumer = client.consumer({
        groupId,
        sessionTimeoutMs: SHORT_SESSION_MS,
        heartbeatIntervalMs: 500,
        maxWaitMs: 200,
        ...options,
      });
      await consumer.connect();
      onCleanup(t, () => consumer.disconnect());
      await consumer.subscribe(topics, true);
      return consumer;
    },
    reader() {
      const reader = client.partitionReader();
      onCleanup(t, () => reader.close());
      return reader;
    },
  };
}

/** Values as text, for short assertions. */
export function text(value: Buffer | string | null | undefined): string | null {
  return value === null || value === undefined ? null : value.toString();
}

/** Sends `values` to one partition in one request. */
export async function sendValues(
  producer: KafkaProducer,
  topic: string,
  partition: number,
  values: readonly string[],
): Promise<void> {
  await producer.send({ topic, messages: values.map((value) => ({ value, partition })) });
}

/** One batch as a handler saw it. */
export interface SeenBatch {
  readonly partition: number;
  readonly offsets: readonly string[];
  readonly lastOffset: string;
  readonly highWatermark: string;
}

/** What a member's handler saw, per partition, in the order it saw it. */
export class Seen {
  readonly messages = new Map<number, ConsumedMessage[]>();
  readonly batches: SeenBatch[] = [];
  readonly joins: GroupJoin[] = [];

  add(batch: ConsumedBatch): void {
    const list = this.messages.get(batch.partition) ?? [];
    list.push(...batch.messages);
    this.messages.set(batch.partition, list);
    this.batches.push({
      partition: batch.partition,
      offsets: batch.messages.map((m) => m.offset),
      lastOffset: batch.lastOffset(),
      highWatermark: batch.highWatermark,
    });
  }

  values(partition: number): string[] {
    return (this.messages.get(partition) ?? []).map((m) => String(text(m.value)));
  }

  offsets(partition: number): number[] {
    return (this.messages.get(partition) ?? []).map((m) => Number(m.offset));
  }

  count(): number {
    let n = 0;
    for (const list of this.messages.values()) n += list.length;
    return n;
  }
}

/**
 * A handler that records every batch, resolves all of it and (unless `commit` is false) commits its end, as the
 * package's own users do.
 */
export function recording(seen: Seen, options: { commit?: boolean } = {}) {
  return async (batch: ConsumedBatch): Promise<void> => {
    seen.add(batch);
    const last = batch.messages[batch.messages.length - 1];
    if (last) batch.resolveOffset(last.offset);
    if (options.commit !== false) await batch.commit(String(BigInt(batch.lastOffset()) + 1n));
  };
}

/** Runs `member` with a {@link recording} handler (one partition at a time) and collects its joins. */
export async function runRecording(
  member: GroupConsumer,
  options: { commit?: boolean; concurrency?: number } = {},
): Promise<Seen> {
  const seen = new Seen();
  member.onGroupJoin((join) => seen.joins.push(join));
  await member.run({
    partitionsConsumedConcurrently: options.concurrency ?? 1,
    eachBatch: recording(seen, options),
  });
  return seen;
}

/** The group's committed offsets of `topic` as partition → offset (-1: none). */
export async function committed(
  admin: KafkaAdmin,
  groupId: string,
  topic: string,
): Promise<Map<number, number>> {
  const offsets = await admin.groupOffsets(groupId, topic);
  return new Map(offsets.map((o) => [o.partition, Number(o.offset)]));
}

/**
 * The group's committed offsets once they read as `expected`. A transactional commit returns when the coordinator
 * has decided it; the offsets become visible to an offset fetch once the commit marker is written to the group's
 * partition, a moment later, so a read right after `commit()` may still see the offsets before it.
 */
export async function committedEventually(
  admin: KafkaAdmin,
  groupId: string,
  topic: string,
  expected: Record<number, number>,
): Promise<Map<number, number>> {
  let seen = new Map<number, number>();
  const want = JSON.stringify(expected);
  await waitFor(
    async () => {
      seen = await committed(admin, groupId, topic);
      return JSON.stringify(Object.fromEntries(seen)) === want;
    },
    {
      what: () =>
        `group ${groupId} to show ${want} for ${topic} (at ${JSON.stringify(Object.fromEntries(seen))})`,
    },
  );
  return seen;
}

/** Waits until the member joined and has an assignment. */
export async function joined(seen: Seen, what = 'the member to join'): Promise<GroupJoin> {
  await waitFor(() => seen.joins.length > 0, { what });
  return seen.joins[seen.joins.length - 1] as GroupJoin;
}

/**
 * The values a read_committed reader sees in `topic`, per partition, read with the client's partition reader
 * (which hands over aborted batches: they are dropped here as Kafka's consumer drops them).
 */
export async function committedValues(
  reader: PartitionReader,
  admin: KafkaAdmin,
  topic: string,
): Promise<Map<number, string[]>> {
  const partitions = await reader.partitions(topic);
  // A commit returns before the coordinator wrote its markers: wait until no transaction holds the stable end.
  let ends = new Map<number, number>();
  await waitFor(
    async () => {
      ends = await reader.listOffsets(topic, partitions, 'latest');
      const high = await admin.topicOffsets(topic);
      return high.every((o) => ends.get(o.partition) === Number(o.high));
    },
    { what: `the transaction markers of ${topic}` },
  );
  const values = new Map<number, string[]>(partitions.map((p) => [p, []]));
  const next = new Map(partitions.map((p) => [p, 0]));
  const open = () => partitions.filter((p) => (next.get(p) ?? 0) < (ends.get(p) ?? 0));
  while (open().length > 0) {
    const fetched = await reader.fetch({
      topic,
      partitions: open().map((p) => ({ partition: p, offset: next.get(p) ?? 0 })),
      maxWaitMs: 100,
      maxBytes: 1 << 20,
      maxBytesPerPartition: 1 << 20,
    });
    for (const f of fetched) {
      const pending = [...f.abortedTransactions].sort((a, b) => a.firstOffset - b.firstOffset);
      const aborting = new Set<number>();
      for (const b of f.batches) {
        const end = b.baseOffset + b.lastOffsetDelta;
        if (end < (next.get(f.partition) ?? 0)) continue;
        next.set(f.partition, end + 1);
        while (pending.length > 0 && (pending[0]?.firstOffset ?? 0) <= end) {
          aborting.add(pending.shift()?.producerId as number);
        }
        if (b.isControl) aborting.delete(b.producerId);
        else if (!(b.inTransaction && aborting.has(b.producerId))) {
          for (const r of b.records) values.get(f.partition)?.push(String(text(r.value)));
        }
      }
    }
  }
  return values;
}
