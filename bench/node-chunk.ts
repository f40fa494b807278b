/**
 * The dedup node's own CPU per record, without a broker (issue 34): the chunk path of `idem node` (id read, store
 * lookup and mark, engine, output records) over in-memory records shaped like bench:kafka's, against a producer
 * that only converts the records as the port does, and against a copy that does only that conversion. On this
 * shared 2-core box a Kafka bench's figures move ±30 % with the load; this one has no broker to wait on, so A/B
 * pairs of it show a change to the node's per-record work:
 *
 *     node --import tsx bench/node-chunk.ts                     # RocksDB, chunks of 1000, 300k records × 4
 *     node --import tsx bench/node-chunk.ts --chunk 10000       # catch-up chunks
 *     node --import tsx bench/node-chunk.ts --mode copy         # the copy's share
 *
 * Each round is a new set of ids (10 % repeats within the round, as bench:kafka's prefill) into the same store.
 * Prints CPU µs per record (this process, all threads: RocksDB's too) per round and the load average.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { openRepository } from '../src/config/repository.js';
import { toProduce } from '../src/kafka/platformatic/records.js';
import type {
  ConsumedMessage,
  KafkaErrorClassifier,
  OutgoingMessage,
  ProduceRequest,
  RecordSender,
} from '../src/kafka/port/index.js';
import { ChunkProcessor, emptyTotals } from '../src/node/chunk.js';
import { NodeMetrics } from '../src/node/metrics.js';
import { nodeConfigSchema } from '../src/node/options.js';
import { OutputWriter } from '../src/node/output.js';
import { PerfLog } from '../src/node/perf-log.js';

const { values } = parseArgs({
  options: {
    records: { type: 'string', default: '300000' },
    chunk: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '4' },
    /** `node` (the chunk path), `copy` (the output records only). */
    mode: { type: 'string', default: 'node' },
    repository: { type: 'string', default: 'rocksdb' },
  },
});
const RECORDS = Number(values.records);
const CHUNK = Number(values.chunk);

/** bench:kafka's records: JSON values with a `uid`, ~10 % repeating an earlier uid of the round. */
function records(first: number): ConsumedMessage[] {
  let state = 42;
  const random = () => {
    state = (state * 1_103_515_245 + 12_345) >>> 0;
    return state / 2 ** 32;
  };
  let distinct = 0;
  const out: ConsumedMessage[] = [];
  for (let j = 0; j < RECORDS; j++) {
    const repeat = distinct > 0 && random() < 0.1;
    const uid = first + (repeat ? Math.floor(random() * distinct) : distinct++);
    out.push({
      key: Buffer.from(`k${uid}`),
      value: Buffer.from(`{"uid":"u-${uid}","n":${j},"source":"bench","payload":"${'x'.repeat(24)}"}`),
      headers: {},
      timestamp: String(1_700_000_000_000 + j),
      offset: String(j),
      attributes: 0,
    });
  }
  return out;
}

/** Converts each record as the platformatic producer does, and sends nothing. */
const producer: RecordSender = {
  send: async (request: ProduceRequest) => {
    for (const m of request.messages) toProduce(request.topic, m);
    return [];
  },
};
const errors = { recordErrorType: () => undefined, isFenced: () => false } as unknown as KafkaErrorClassifier;

const dir = await mkdtemp(join(tmpdir(), 'idem-bench-node-chunk-'));
const config = nodeConfigSchema.parse({
  kafka: { brokers: ['127.0.0.1:9'] },
  input: { topic: 'in' },
  output: { topic: 'out' },
  dlq: { topic: 'dlq' },
  dedup: { id: 'uid' },
  repository: values.repository === 'memory' ? { type: 'memory' } : { type: 'rocksdb', path: dir },
});
const repository = await openRepository(config);
const output = new OutputWriter(producer, {
  topic: 'out',
  maxBatchBytes: 1_000_000,
  sendAttempts: 1,
  retryBackoffMs: 1,
  errors,
});
const chunks = new ChunkProcessor({
  repository,
  producer: producer as never,
  metrics: new NodeMetrics(),
  perf: new PerfLog(),
  totals: emptyTotals(),
  logger: pino({ level: 'warn' }),
  dedup: config.dedup,
  dlqTopic: 'dlq',
  audit: undefined,
  output,
});

try {
  for (let round = 0; round < Number(values.rounds); round++) {
    const input = records(round * 10 * RECORDS);
    const cpu = process.cpuUsage();
    for (let i = 0; i < input.length; i += CHUNK) {
      const chunk = input.slice(i, i + CHUNK);
      if (values.mode === 'copy') {
        const outgoing: OutgoingMessage[] = chunk.map((m) => ({
          key: m.key,
          value: m.value,
          headers: m.headers,
          timestamp: m.timestamp,
          partition: 0,
        }));
        await producer.send({ topic: 'out', acks: -1, messages: outgoing });
      } else await chunks.handle('in', 0, chunk);
    }
    const used = process.cpuUsage(cpu);
    const micros = (used.user + used.system) / RECORDS;
    process.stdout.write(
      `${values.mode} ${values.repository} chunks of ${CHUNK}, round ${round}: ${micros.toFixed(2)} µs CPU/record ` +
        `(load ${loadavg()[0]?.toFixed(2)})\n`,
    );
  }
} finally {
  await repository.close();
  await rm(dir, { recursive: true, force: true });
}
