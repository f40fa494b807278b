/**
 * Helpers for tests against the Kafka test broker (KAFKA_BROKERS, default 127.0.0.1:9092).
 *
 * Every helper that creates something registers its own cleanup with {@link onCleanup} (last created, first
 * cleaned), and names are random per call, so tests never collide and leave nothing behind:
 *
 *     const kafka = testKafka();
 *     const admin = await kafkaAdmin(t, kafka);
 *     const topic = await createTopic(t, admin);                 // 3 partitions
 *     const groupId = randomGroupId(t, admin);
 *     await produce(await testProducer(t, kafka), topic, [{ key: 'a', value: '{"id":1}' }]);
 *     await waitForCommitted(admin, groupId, topic);             // the group committed up to the end
 *     const all = await consumeAll(kafka, topic);                // every record now in the topic
 */
import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import {
  type Admin,
  type IHeaders,
  Kafka,
  logLevel,
  type Message,
  Partitioners,
  type Producer,
} from 'kafkajs';
import {
  defaultKafkaClient,
  type KafkaAdmin,
  type KafkaClient,
  type KafkaClientName,
  kafkaClientNames,
  openKafkaClient,
} from '../../src/kafka/port/index.js';
import { endpoints } from './stores.js';

const cleanups = new WeakMap<TestContext, (() => unknown)[]>();

/**
 * Runs `fn` after the test, in reverse order of registration (node:test runs `t.after` hooks first-in first-out,
 * which would disconnect the admin before it deletes the topics). Every helper here registers through this, so
 * register a consumer's stop with it too and it runs first: stop consumers, then delete topics and groups, then
 * disconnect. A failing cleanup does not stop the others; the first failure is raised at the end.
 */
export function onCleanup(t: TestContext, fn: () => unknown): void {
  let stack = cleanups.get(t);
  if (!stack) {
    const fns: (() => unknown)[] = [];
    stack = fns;
    cleanups.set(t, fns);
    t.after(async () => {
      let failure: unknown;
      for (const cleanup of fns.reverse()) {
        try {
          await cleanup();
        } catch (error) {
          failure ??= error;
        }
      }
      if (failure !== undefined) throw failure;
    });
  }
  stack.push(fn);
}

/**
 * The Kafka client library the package's own Kafka code runs on in this test run: `IDEM_KAFKA_CLIENT` (kafkajs or
 * platformatic; default the package's own default, platformatic), so the node, adapter, changelog and `kafka` repository suites run on either.
 * The tests' own instrumentation (topics, input, reading the output back) stays on kafkajs.
 */
export function testKafkaClientName(): KafkaClientName {
  const name = process.env.IDEM_KAFKA_CLIENT || defaultKafkaClient;
  if (!(kafkaClientNames as readonly string[]).includes(name)) {
    throw new Error(`IDEM_KAFKA_CLIENT=${name}: expected one of ${kafkaClientNames.join(', ')}`);
  }
  return name as KafkaClientName;
}

/** The test broker as connection settings (a `[kafka]` table's keys), for the client `testKafkaClientName()`. */
export function testConnection(clientId = 'idem-test') {
  return {
    client: testKafkaClientName(),
    brokers: [...endpoints.kafkaBrokers],
    clientId,
    ssl: false as const,
    connectionTimeout: 5_000,
    requestTimeout: 30_000,
  };
}

/**
 * A client of the Kafka port for the test broker, on the client `testKafkaClientName()`, quiet; closed after the
 * test when `t` is given.
 */
export async function testClient(t?: TestContext, options: { clientId?: string } = {}): Promise<KafkaClient> {
  const client = await openKafkaClient(testConnection(options.clientId), { retries: 5 });
  if (t) onCleanup(t, () => client.close());
  return client;
}

/**
 * Adapter options on the test run's client: a kafkajs `kafka` instance is replaced by connection settings and
 * `client` when `IDEM_KAFKA_CLIENT` names another client, and connection settings without a `client` get the test
 * run's (options given a kafkajs consumer stay on kafkajs).
 */
export function onTestClient<O extends { readonly kafka?: unknown; readonly client?: KafkaClientName }>(
  options: O,
): O {
  const name = testKafkaClientName();
  if (options.kafka === undefined) return options;
  if (options.kafka instanceof Kafka) {
    if (name === 'kafkajs') return options;
    return {
      ...options,
      kafka: { brokers: [...endpoints.kafkaBrokers], clientId: 'idem-test' },
      client: name,
    };
  }
  return options.client === undefined ? { ...options, client: name } : options;
}

/** A connected admin of the Kafka port (client `testKafkaClientName()`), disconnected after the test. */
export async function testPortAdmin(t: TestContext): Promise<KafkaAdmin> {
  const admin = (await testClient(t)).admin();
  await admin.connect();
  onCleanup(t, () => admin.disconnect());
  return admin;
}

/** A kafkajs client for the test broker that logs nothing (pass `logLevel.WARN` to debug a test). */
export function testKafka(options: { clientId?: string; level?: logLevel } = {}): Kafka {
  return new Kafka({
    clientId: options.clientId ?? 'idem-test',
    brokers: [...endpoints.kafkaBrokers],
    logLevel: options.level ?? logLevel.NOTHING,
    // Fail fast when the broker is missing; the stack must be up (a missing server fails, never skips).
    connectionTimeout: 5_000,
    retry: { retries: 5, initialRetryTime: 100 },
  });
}

/** A name unique to this call: `prefix-<12 hex>`. Topics, groups and DLQs all take one. */
export function randomName(prefix: string): string {
  return `${prefix}-${randomBytes(6).toString('hex')}`;
}

/** A connected admin client, disconnected after the test. */
export async function kafkaAdmin(t: TestContext, kafka: Kafka = testKafka()): Promise<Admin> {
  const admin = kafka.admin();
  await admin.connect();
  onCleanup(t, () => admin.disconnect());
  return admin;
}

/**
 * Creates topics and waits until each partition has a leader that serves it. Not kafkajs's `waitForLeaders` (on by
 * default): on a loaded broker its metadata request for a topic just created can meet UNKNOWN_TOPIC_OR_PARTITION
 * ("This server does not host this topic-partition"), which it does not retry (seen in CI runs).
 */
export async function createTopicsAndWait(
  admin: Admin,
  topics: { topic: string; numPartitions?: number; configEntries?: { name: string; value: string }[] }[],
): Promise<void> {
  await admin.createTopics({
    topics: topics.map((t) => ({ replicationFactor: 1, ...t })),
    waitForLeaders: false,
  });
  const names = topics.map((t) => t.topic);
  await waitFor(
    async () => {
      try {
        const metadata = await admin.fetchTopicMetadata({ topics: names });
        const ready = topics.every(({ topic, numPartitions }) => {
          const found = metadata.topics.find((m) => m.name === topic)?.partitions ?? [];
          return found.length === (numPartitions ?? (found.length || 1)) && found.every((p) => p.leader >= 0);
        });
        // A leader in the metadata may not serve the partition yet: ready once its offsets can be listed.
        if (ready) await Promise.all(names.map((topic) => admin.fetchTopicOffsets(topic)));
        return ready;
      } catch {
        return false; // not known to the broker yet
      }
    },
    { timeoutMs: 60_000, intervalMs: 100, what: `leaders for the partitions of ${names.join(', ')}` },
  );
}

/** Creates a topic with a random name (3 partitions unless told), waits for its leaders, deletes it after the test. */
export async function createTopic(
  t: TestContext,
  admin: Admin,
  options: { partitions?: number; prefix?: string } = {},
): Promise<string> {
  const topic = randomName(options.prefix ?? 'idem-test');
  onCleanup(t, () => admin.deleteTopics({ topics: [topic] }).catch(() => undefined));
  await createTopicsAndWait(admin, [{ topic, numPartitions: options.partitions ?? 3 }]);
  return topic;
}

/**
 * A random consumer group id. Its offsets are deleted after the test (best effort: a group whose consumer is
 * still connected cannot be deleted, and the broker expires empty groups anyway).
 */
export function randomGroupId(t: TestContext, admin: Admin, prefix = 'idem-group'): string {
  const groupId = randomName(prefix);
  onCleanup(t, () => admin.deleteGroups([groupId]).catch(() => undefined));
  return groupId;
}

/** The usual start of a Kafka test: a client, its admin, a fresh input topic and a group id. */
export interface KafkaTestbed {
  readonly kafka: Kafka;
  readonly admin: Admin;
  readonly topic: string;
  readonly groupId: string;
}

/** Sets up a {@link KafkaTestbed} (3 partitions unless told); everything is removed after the test. */
export async function kafkaTestbed(
  t: TestContext,
  options: { partitions?: number } = {},
): Promise<KafkaTestbed> {
  const kafka = testKafka();
  const admin = await kafkaAdmin(t, kafka);
  const topic = await createTopic(
    t,
    admin,
    options.partitions === undefined ? {} : { partitions: options.partitions },
  );
  return { kafka, admin, topic, groupId: randomGroupId(t, admin) };
}

/** A connected producer, disconnected after the test. */
export async function testProducer(t: TestContext, kafka: Kafka): Promise<Producer> {
  // Idempotent: a retried send (a partition not yet served by a topic just created fails while another in the
  // same request was written) must not write the accepted partition twice; seen as 100 records where 50 were sent.
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    idempotent: true,
    maxInFlightRequests: 1,
  });
  await producer.connect();
  onCleanup(t, () => producer.disconnect());
  return producer;
}

/**
 * Sends records in order, `chunk` per request, each request acknowledged by all in-sync replicas. Records with
 * one key land in one partition in send order (the default partitioner hashes the key).
 */
export async function produce(
  producer: Producer,
  topic: string,
  messages: readonly Message[],
  chunk = 1_000,
): Promise<void> {
  for (let i = 0; i < messages.length; i += chunk) {
    await producer.send({ topic, acks: -1, messages: messages.slice(i, i + chunk) });
  }
}

/** One record as read back by {@link consumeAll}. */
export interface ConsumedRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: IHeaders;
  readonly timestamp: string;
}

/**
 * Reads every record in the topic up to its end offsets as of the call, with a throwaway group that is deleted
 * afterwards. Sorted by partition, then offset. Rejects after `timeoutMs`.
 */
export async function consumeAll(
  kafka: Kafka,
  topic: string,
  options: { timeoutMs?: number } = {},
): Promise<ConsumedRecord[]> {
  const admin = kafka.admin();
  await admin.connect();
  const groupId = randomName('idem-read');
  const consumer = kafka.consumer({ groupId, maxWaitTimeInMs: 200 });
  try {
    const ends = await endOffsets(admin, topic);
    const remaining = new Set([...ends].filter(([, end]) => end > 0).map(([p]) => p));
    const records: ConsumedRecord[] = [];
    if (remaining.size === 0) return records;
    await consumer.connect();
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    let finish: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    await consumer.run({
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) {
          const offset = Number(m.offset);
          if (offset >= (ends.get(batch.partition) ?? 0)) break;
          records.push({
            topic,
            partition: batch.partition,
            offset,
            key: m.key,
            value: m.value,
            headers: m.headers ?? {},
            timestamp: m.timestamp,
          });
          if (offset + 1 >= (ends.get(batch.partition) ?? 0)) remaining.delete(batch.partition);
        }
        if (remaining.size === 0) finish();
      },
    });
    await withTimeout(finished, options.timeoutMs ?? 30_000, `reading all of ${topic}`);
    return records.sort((a, b) => a.partition - b.partition || a.offset - b.offset);
  } finally {
    await consumer.disconnect().catch(() => undefined);
    await admin.deleteGroups([groupId]).catch(() => undefined);
    await admin.disconnect();
  }
}

/** The next offset to be written, per partition (the high watermark). */
export async function endOffsets(admin: Admin, topic: string): Promise<Map<number, number>> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return new Map(offsets.map((o) => [o.partition, Number(o.high)]));
}

/** The group's committed offset per partition: the next offset it will read (-1 when nothing is committed). */
export async function committedOffsets(
  admin: Admin,
  groupId: string,
  topic: string,
): Promise<Map<number, number>> {
  const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return new Map((entry?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
}

/**
 * Moves the group's offsets back to the start of the topic (a deliberate replay); retried while the broker still
 * counts a member that is leaving, as it refuses to reset a group that is not empty.
 */
export async function resetGroupToStart(admin: Admin, groupId: string, topic: string): Promise<void> {
  await waitFor(
    () =>
      admin
        .resetOffsets({ groupId, topic, earliest: true })
        .then(() => true)
        .catch(() => false),
    { timeoutMs: 60_000, intervalMs: 250, what: `group ${groupId} to be empty, so its offsets can be reset` },
  );
}

/** Waits until the group has committed every partition of the topic up to its end offset. */
export async function waitForCommitted(
  admin: Admin,
  groupId: string,
  topic: string,
  options: { timeoutMs?: number } = {},
): Promise<Map<number, number>> {
  let committed = new Map<number, number>();
  let lastError = '';
  const ends = await endOffsets(admin, topic);
  await waitFor(
    async () => {
      try {
        committed = await committedOffsets(admin, groupId, topic);
      } catch (error) {
        // Just after a broker (re)start the group coordinator answers "loading" for a while, past kafkajs's own
        // retries (which then wrap the error as its cause): not yet, as long as the error says a retry may pass.
        const { retriable, cause } = error as { retriable?: boolean; cause?: { retriable?: boolean } };
        if (retriable !== true && cause?.retriable !== true) throw error;
        lastError = `; last read: ${(error as Error).message}`;
        return false;
      }
      return [...ends].every(([p, end]) => end === 0 || committed.get(p) === end);
    },
    {
      timeoutMs: options.timeoutMs,
      what: () => `group ${groupId} to commit ${topic} to ${fmt(ends)} (at ${fmt(committed)}${lastError})`,
    },
  );
  return committed;
}

/**
 * Polls `check` every `intervalMs` until it returns true; rejects after `timeoutMs` (default 30 s) naming what
 * it waited for. A guard against hangs, not a timing assertion.
 */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string | (() => string) } = {},
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) {
      const what = typeof options.what === 'function' ? options.what() : (options.what ?? 'a condition');
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 100));
  }
}

/** A header value as text (the last one when repeated). */
export function headerText(headers: IHeaders, name: string): string | undefined {
  const value = headers[name];
  const last = Array.isArray(value) ? value[value.length - 1] : value;
  return last?.toString();
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function fmt(offsets: Map<number, number>): string {
  return JSON.stringify(Object.fromEntries(offsets));
}

/**
 * Why the installed default client cannot run on this Node, or false when it can. The lock holds
 * @platformatic/kafka 2.x, which needs Node 22 (it calls Promise.withResolvers); a Node 20 user installs 1.x by
 * hand (README, Node versions), which CI's server-free Node 20 runs do not have.
 */
export function platformaticCannotRunHere(): string | false {
  return typeof (Promise as { withResolvers?: unknown }).withResolvers !== 'function'
    ? 'the installed @platformatic/kafka 2.x needs Node 22'
    : false;
}
