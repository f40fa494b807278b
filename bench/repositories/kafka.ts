/**
 * Restore speed of the changelog primitive and of the `kafka` repository against the stack's broker (KAFKA_BROKERS):
 * `--ids` marks are written to a fresh changelog topic, then read back
 *   - by a plain kafkajs group consumer that does nothing with them (the baseline: kafkajs's own fetch and decode,
 *     plus its group join), measured in the same run;
 *   - by `readChangelog` into a Map of expiries (the node's restore path without its store);
 *   - by `KafkaRepository.open`, whose warm-up decodes every record into its local index;
 *   - by `readChangelog` from a checkpoint at the end (a restart with nothing new: the fixed cost of a restore).
 * Prints figures and ratios; asserts nothing.
 *
 *   node --import tsx bench/repositories/kafka.ts [--ids 1000000] [--partitions 3] [--json figures.json]
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import {
  ChangelogReader,
  decodeMarkExpiry,
  encodeMark,
  ensureChangelogTopic,
  readChangelog,
} from '../../src/kafka/changelog/index.js';
import { fromKafkajs, KafkajsAdmin } from '../../src/kafka/kafkajs/index.js';
import { KafkaRepository } from '../../src/repositories/kafka/index.js';
import { FigureSink } from '../report/figures.js';

const { values } = parseArgs({
  options: {
    ids: { type: 'string', default: '1000000' },
    partitions: { type: 'string', default: '3' },
    json: { type: 'string' },
  },
});
const IDS = Number(values.ids);
const PARTITIONS = Number(values.partitions);
const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(',');
const topic = `idem-bench-changelog-${randomUUID().slice(0, 8)}`;
const sink = new FigureSink(
  'kafka-repository',
  `node --import tsx bench/repositories/kafka.ts --ids ${IDS} --partitions ${PARTITIONS}`,
);
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const kafka = new Kafka({ clientId: 'idem-bench', brokers: BROKERS, logLevel: logLevel.NOTHING });

async function seconds(body: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await body();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

function rate(label: string, count: number, elapsed: number): number {
  const perSecond = count / elapsed;
  sink.figure(label, perSecond, 'ids/s');
  console.log(`  ${label}: ${fmt(perSecond)} ids/s (${elapsed.toFixed(2)} s)`);
  return perSecond;
}

/** Writes IDS marks: keys like the canonical key of a UUID id, 9-byte values. */
async function fill(): Promise<void> {
  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const expiresAt = Date.now() + 3_600_000;
  const chunk = 20_000;
  for (let i = 0; i < IDS; i += chunk * 4) {
    const sends = [];
    for (let j = i; j < Math.min(IDS, i + chunk * 4); j += chunk) {
      const messages = [];
      for (let k = j; k < Math.min(IDS, j + chunk); k++) {
        messages.push({
          key: `00000000-0000-4000-8000-${String(k).padStart(12, '0')}`,
          value: encodeMark({ expiresAt }),
        });
      }
      sends.push(producer.send({ topic, acks: 1, messages }));
    }
    await Promise.all(sends);
  }
  await producer.disconnect();
}

/** The baseline: a kafkajs group consumer reading every record from the start and doing nothing with it. */
async function kafkajsConsumer(): Promise<void> {
  const consumer = kafka.consumer({
    groupId: `idem-bench-${randomUUID().slice(0, 8)}`,
    maxBytesPerPartition: 8 * 1024 * 1024,
    maxBytes: 16 * 1024 * 1024,
    readUncommitted: false,
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  let seen = 0;
  await new Promise<void>((resolve, reject) => {
    consumer
      .run({
        autoCommit: false,
        eachBatch: async ({ batch }) => {
          seen += batch.messages.length;
          if (seen >= IDS) resolve();
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
}

async function main(): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  await ensureChangelogTopic(new KafkajsAdmin(admin), {
    topic,
    partitions: PARTITIONS,
    retentionMs: 86_400_000,
    configKey: 'bench',
    replicationFactor: 1,
  });
  try {
    console.log(`kafka changelog restore, ${fmt(IDS)} ids in ${PARTITIONS} partitions (topic ${topic})`);
    rate('write marks (kafkajs producer, 4 x 20k per request)', IDS, await seconds(fill));
    const baseline = rate('baseline: kafkajs group consumer, no work', IDS, await seconds(kafkajsConsumer));

    const partitions = new Map(Array.from({ length: PARTITIONS }, (_, p) => [p, 0]));
    const expiries = new Map<string, number>();
    let ends = new Map<number, number>();
    const restore = rate(
      'readChangelog into a Map of expiries',
      IDS,
      await seconds(async () => {
        ends = await readChangelog(fromKafkajs(kafka), {
          topic,
          from: partitions,
          onBatch: (_p, records) => {
            for (const r of records) {
              if (r.value === null) expiries.delete(r.key);
              else expiries.set(r.key, decodeMarkExpiry(r.value));
            }
          },
        });
      }),
    );
    if (expiries.size !== IDS) throw new Error(`restored ${expiries.size} ids, expected ${IDS}`);

    let repository: KafkaRepository | undefined;
    const warm = rate(
      'KafkaRepository.open (warm-up into the memory index)',
      IDS,
      await seconds(async () => {
        repository = await KafkaRepository.open({
          brokers: BROKERS,
          topic,
          partitions: PARTITIONS,
          ttl: '1d',
        });
      }),
    );
    await repository?.close();

    const reader = new ChangelogReader(fromKafkajs(kafka));
    const resume = await seconds(async () => {
      await reader.read({ topic, from: ends, onBatch: () => undefined });
    });
    await reader.close();
    sink.figure('restore from a checkpoint at the end (nothing new)', resume * 1000, 'ms');
    console.log(`  restore from a checkpoint at the end (nothing new): ${(resume * 1000).toFixed(0)} ms`);

    for (const [id, label, value] of [
      ['kafka.restore-vs-kafkajs-consumer', 'readChangelog restore / kafkajs consumer', restore / baseline],
      [
        'kafka.repository-warmup-vs-kafkajs-consumer',
        'repository warm-up / kafkajs consumer',
        warm / baseline,
      ],
    ] as const) {
      sink.ratio({ id, label, value, kind: 'min', baseline: 'kafkajs group consumer, no work, same run' });
      console.log(`  ${label}: ${value.toFixed(2)}x`);
    }
    sink.write(values.json);
  } finally {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }
}

await main();
