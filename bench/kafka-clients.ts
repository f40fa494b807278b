/**
 * A plain topic → topic copy on each Kafka client, in one run on the stack's broker (KAFKA_BROKERS), to compare
 * the clients themselves before any dedup work is added (issue 21):
 *
 *     npm run bench:kafka-clients                       # 300k records, 3 partitions
 *     npm run bench:kafka-clients -- --records 30000    # quicker
 *     npm run bench:kafka-clients -- --only platformatic
 *
 * 1. Pre-fills one 3-partition topic once (JSON values of about 80 bytes, keyed).
 * 2. Copies it to a fresh topic with each client, both with the node's settings: fetches of `maxBytesPerPartition`
 *    / `maxBytes`, `batchTimeout` as the fetch wait, chunks of `batchSize` records sent one request at a time by an
 *    idempotent producer (acks = all), and one offset commit per fetched partition batch.
 *    - kafkajs: `eachBatch`, as the node runs it.
 *    - @platformatic/kafka: its messages stream is drained in batches (every record already buffered, grouped by
 *      partition) rather than awaited record by record through the async iterator, which costs about 3× more.
 *    - the package's own Kafka port on @platformatic/kafka (src/kafka/platformatic: its batch fetch loop over
 *      `Consumer.fetch`, what the node runs on with `kafka.client = "platformatic"`), through `eachBatch`.
 * Prints records/s, CPU µs per record (this process, from the first copied record to the last), the ratio
 * platformatic / kafkajs, and the load average. Asserts nothing: timed assertions belong to no test.
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Consumer as PlatformaticConsumer, Producer as PlatformaticProducer } from '@platformatic/kafka';
import { Kafka, logLevel, type Message } from 'kafkajs';
import { createClient } from '../src/kafka/platformatic/index.js';
import { nodeDefaults } from '../src/node/options.js';
import { startKafkajsCopy } from './kafkajs-copy.js';
import { startPortCopy } from './port-copy.js';

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '300000' },
    partitions: { type: 'string', default: '3' },
    'batch-size': { type: 'string', default: String(nodeDefaults.batchSize) },
    /** Comma-separated clients to run, in that order: `kafkajs,platformatic,port`. */
    only: { type: 'string', default: 'kafkajs,platformatic,port' },
  },
});
const RECORDS = Number(values.records);
const PARTITIONS = Number(values.partitions);
const CHUNK = Number(values['batch-size']);
const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const FETCH = {
  maxWaitMs: nodeDefaults.batchTimeoutMs,
  maxBytesPerPartition: nodeDefaults.maxBytesPerPartition,
  maxBytes: nodeDefaults.maxBytes,
};
const suffix = Math.random().toString(36).slice(2, 8);
const kafka = new Kafka({ clientId: 'idem-bench-clients', brokers: BROKERS, logLevel: logLevel.NOTHING });
const admin = kafka.admin();
const topics: string[] = [];

interface Result {
  readonly name: string;
  readonly recordsPerSecond: number;
  readonly cpuMicrosPerRecord: number;
  readonly seconds: number;
}

function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function createTopic(name: string): Promise<string> {
  await admin.createTopics({ topics: [{ topic: name, numPartitions: PARTITIONS }], waitForLeaders: true });
  topics.push(name);
  return name;
}

async function prefill(topic: string): Promise<void> {
  const producer = kafka.producer();
  await producer.connect();
  const start = performance.now();
  for (let i = 0; i < RECORDS; i += 10_000) {
    const messages: Message[] = [];
    for (let j = i; j < Math.min(RECORDS, i + 10_000); j++) {
      messages.push({
        key: `k${j}`,
        value: `{"uid":"u-${j}","n":${j},"source":"bench","payload":"${'x'.repeat(24)}"}`,
        partition: j % PARTITIONS,
      });
    }
    await producer.send({ topic, acks: 1, messages });
  }
  await producer.disconnect();
  log(`prefill: ${RECORDS} records in ${((performance.now() - start) / 1000).toFixed(1)} s`);
}

/** Polls the copied count; the rate and CPU run from the first copied record to the last (no group join). */
async function measure(count: () => number): Promise<Omit<Result, 'name'>> {
  let t0 = 0;
  let c0 = 0;
  let cpu0 = process.cpuUsage();
  for (;;) {
    const n = count();
    const now = performance.now();
    if (t0 === 0 && n > 0) {
      t0 = now;
      c0 = n;
      cpu0 = process.cpuUsage();
    }
    if (n >= RECORDS) {
      const seconds = (now - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      return {
        seconds,
        recordsPerSecond: (n - c0) / seconds,
        cpuMicrosPerRecord: (cpu.user + cpu.system) / (n - c0),
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function copyKafkajs(input: string, output: string): Promise<Result> {
  const running = await startKafkajsCopy(kafka, {
    groupId: `idem-bench-kafkajs-${suffix}`,
    input,
    output,
    chunkSize: CHUNK,
    maxWaitMs: FETCH.maxWaitMs,
    maxBytesPerPartition: FETCH.maxBytesPerPartition,
    maxBytes: FETCH.maxBytes,
  });
  const figures = await measure(running.copied);
  await running.stop();
  return { name: 'kafkajs (eachBatch)', ...figures };
}

type PlatformaticMessage = {
  key: Buffer;
  value: Buffer;
  headers: Map<Buffer, Buffer>;
  partition: number;
  timestamp: bigint;
  offset: bigint;
};

async function copyPlatformatic(input: string, output: string): Promise<Result> {
  const base = { clientId: 'idem-bench-clients', bootstrapBrokers: BROKERS };
  const producer = new PlatformaticProducer({ ...base, idempotent: true, autocreateTopics: false });
  const consumer = new PlatformaticConsumer({
    ...base,
    groupId: `idem-bench-platformatic-${suffix}`,
    maxWaitTime: FETCH.maxWaitMs,
    maxBytesPerPartition: FETCH.maxBytesPerPartition,
    maxBytes: FETCH.maxBytes,
  });
  const stream = await consumer.consume({
    topics: [input],
    mode: 'committed',
    fallbackMode: 'earliest',
    autocommit: false,
    // In records: enough for a few full fetches before the stream stops fetching.
    highWaterMark: 4 * CHUNK * PARTITIONS,
  });
  let copied = 0;
  let stopped = false;
  // A permanent 'readable' listener: with none, the stream counts as unread (`readableFlowing` null) and its
  // fetch loop stops for good the next time it is asked for records.
  let wake: (() => void) | undefined;
  stream.on('readable', () => wake?.());
  stream.on('close', () => wake?.());
  const loop = (async () => {
    while (!stopped) {
      // Everything buffered now is one batch, split by partition (records of a partition stay in order).
      const byPartition = new Map<number, PlatformaticMessage[]>();
      for (let m = stream.read() as PlatformaticMessage | null; m !== null; m = stream.read()) {
        let list = byPartition.get(m.partition);
        if (list === undefined) {
          list = [];
          byPartition.set(m.partition, list);
        }
        list.push(m);
      }
      if (byPartition.size === 0) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        continue;
      }
      for (const [partition, messages] of byPartition) {
        for (let i = 0; i < messages.length; i += CHUNK) {
          const chunk = messages.slice(i, i + CHUNK);
          await producer.send({
            messages: chunk.map((m) => ({
              topic: output,
              key: m.key,
              value: m.value,
              headers: m.headers,
              timestamp: m.timestamp,
              partition,
            })),
          });
          copied += chunk.length;
        }
        const last = messages[messages.length - 1] as PlatformaticMessage;
        await consumer.commit({
          offsets: [{ topic: input, partition, offset: last.offset + 1n, leaderEpoch: -1 }],
        });
      }
    }
  })();
  const figures = await measure(() => copied);
  stopped = true;
  await stream.close();
  await loop;
  await consumer.close();
  await producer.close();
  return { name: '@platformatic/kafka (stream drained in batches)', ...figures };
}

/** The same copy through the package's Kafka port on @platformatic/kafka, as the node drives it. */
async function copyPort(input: string, output: string): Promise<Result> {
  const client = await createClient(
    {
      brokers: BROKERS,
      clientId: 'idem-bench-port',
      ssl: false,
      connectionTimeout: 10_000,
      requestTimeout: 30_000,
    },
    { retries: 5 },
  );
  const running = await startPortCopy(client, {
    groupId: `idem-bench-port-${suffix}`,
    input,
    output,
    chunkSize: CHUNK,
    ...FETCH,
  });
  const figures = await measure(running.copied);
  await running.stop();
  await client.close();
  return { name: 'idem Kafka port on @platformatic/kafka (eachBatch)', ...figures };
}

async function main(): Promise<void> {
  await admin.connect();
  try {
    const input = await createTopic(`idem-bench-clients-in-${suffix}`);
    await prefill(input);
    const results = new Map<string, Result>();
    for (const client of (values.only ?? '').split(',')) {
      const output = await createTopic(`idem-bench-clients-out-${client}-${suffix}`);
      if (client === 'kafkajs') results.set(client, await copyKafkajs(input, output));
      else if (client === 'platformatic') results.set(client, await copyPlatformatic(input, output));
      else if (client === 'port') results.set(client, await copyPort(input, output));
      else throw new Error(`--only: unknown client '${client}' (kafkajs, platformatic, port)`);
      const r = results.get(client) as Result;
      log(
        `${r.name}: ${Math.round(r.recordsPerSecond)} records/s, ${r.cpuMicrosPerRecord.toFixed(1)} CPU µs/record ` +
          `(${r.seconds.toFixed(1)} s)`,
      );
    }
    const a = results.get('kafkajs');
    for (const other of ['platformatic', 'port']) {
      const b = results.get(other);
      if (!a || !b) continue;
      log(
        `ratio ${other}/kafkajs: records/s ${(b.recordsPerSecond / a.recordsPerSecond).toFixed(2)}, ` +
          `CPU µs/record ${(b.cpuMicrosPerRecord / a.cpuMicrosPerRecord).toFixed(2)}`,
      );
    }
    log(
      `load average: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')} (${RECORDS} records, ${PARTITIONS} partitions)`,
    );
  } finally {
    await admin.deleteTopics({ topics }).catch(() => undefined);
    await admin.disconnect();
  }
}

await main();
