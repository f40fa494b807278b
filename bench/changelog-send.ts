/**
 * CPU per changelog change of the exactly-once node's changelog writes (issue 34), one record per id against
 * packs (`ChangelogTarget.pack`), on one transactional producer of the node's client, in the same run:
 *
 *     node --import tsx bench/changelog-send.ts [--client platformatic] [--rounds 6] [--transactions 20]
 *
 * Each transaction sends 10 chunks of 900 marks (a span of 10,000 input records with 10% duplicates) to one
 * partition of a topic of its own, then commits. The two modes alternate round by round; the figure is this
 * process's CPU time (user + system) per change, median over the rounds, beside the load average. Asserts nothing.
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { ensureChangelogTopic, sendChanges } from '../src/kafka/changelog/index.js';
import { type KafkaClientName, openKafkaClient } from '../src/kafka/port/index.js';
import type { ChangelogChange } from '../src/store/changelog.js';

const { values } = parseArgs({
  options: {
    client: { type: 'string', default: 'platformatic' },
    rounds: { type: 'string', default: '6' },
    transactions: { type: 'string', default: '20' },
  },
});
const ROUNDS = Number(values.rounds);
const TRANSACTIONS = Number(values.transactions);
const CHUNKS = 10;
const MARKS = 900;

const kafka = await openKafkaClient(
  {
    brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
    clientId: 'idem-bench-changelog-send',
    ssl: false,
    connectionTimeout: 10_000,
    requestTimeout: 30_000,
    client: values.client as KafkaClientName,
  },
  { retries: 5 },
);
const topic = `idem-bench-changelog-send-${randomUUID()}`;
const admin = kafka.admin();
await admin.connect();
await ensureChangelogTopic(admin, { topic, partitions: 1, retentionMs: 3_600_000, configKey: 'bench' });
const producer = kafka.producer({ transactionalId: `idem-bench-changelog-send-${randomUUID()}` });
await producer.connect();

let seq = 0;
/** A chunk's marks as the node stages them: uuid-like ids, one expiry. */
function chunk(): ChangelogChange[] {
  const expiresAt = Date.now() + 3 * 3_600_000;
  return Array.from({ length: MARKS }, () => {
    const key = `${randomUUID().slice(0, 24)}-${seq++}`;
    return { key, record: { id: key, state: 'confirmed', expiresAt } };
  });
}

async function round(pack: boolean): Promise<number> {
  const chunks = Array.from({ length: TRANSACTIONS * CHUNKS }, chunk);
  const cpu = process.cpuUsage();
  for (let t = 0; t < TRANSACTIONS; t++) {
    const tx = await producer.transaction();
    for (let c = 0; c < CHUNKS; c++) {
      await sendChanges(tx, { topic, partition: 0, pack }, chunks[t * CHUNKS + c] as ChangelogChange[]);
    }
    await tx.commit();
  }
  const used = process.cpuUsage(cpu);
  return (used.user + used.system) / (TRANSACTIONS * CHUNKS * MARKS);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const figures: Record<'per id' | 'packed', number[]> = { 'per id': [], packed: [] };
try {
  await round(false); // warm-up, both paths compiled
  await round(true);
  for (let r = 0; r < ROUNDS; r++) {
    for (const pack of r % 2 === 0 ? [false, true] : [true, false]) {
      figures[pack ? 'packed' : 'per id'].push(await round(pack));
    }
  }
} finally {
  await producer.disconnect();
  await admin.deleteTopics([topic]).catch(() => undefined);
  await admin.disconnect();
  await kafka.close();
}
for (const [mode, xs] of Object.entries(figures)) {
  console.log(
    `${mode.padEnd(7)} cpu µs/change median ${median(xs).toFixed(2)}  (${xs.map((x) => x.toFixed(2)).join(' ')})`,
  );
}
console.log(
  `saved per change: ${(median(figures['per id']) - median(figures.packed)).toFixed(2)} µs; load ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
