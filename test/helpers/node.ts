/**
 * Helpers for the dedup node tests (test/node): generated input with known duplicates, the node as a child
 * process (`src/node/bin.ts`) or in this process, and checks of the output against the input.
 *
 *     const data = dedupInput({ records: 10_000, duplicateShare: 0.2, partitions: 3, batchSize: 500 });
 *     await produceInput(producer, topic, data);
 *     const path = await writeNodeConfig(t, nodeConfig({ topic, ... }));
 *     const child = startNodeProcess(t, path);
 *     await child.waitForLog((l) => l.msg === 'dedup node running');
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, mkdirSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Admin, Kafka, Producer } from 'kafkajs';
import { pino } from 'pino';
import { stringify } from 'smol-toml';
import { openRepository } from '../../src/config/repository.js';
import { type DedupNodeHandle, startDedupNode } from '../../src/node/dedup-node.js';
import { type NodeConfig, type NodeConfigInput, nodeConfigSchema } from '../../src/node/options.js';
import {
  type ConsumedRecord,
  committedOffsets,
  consumeAll,
  createTopic,
  endOffsets,
  headerText,
  type KafkaTestbed,
  kafkaTestbed,
  onCleanup,
  testKafkaClientName,
  waitFor,
} from './kafka.js';
import { prng } from './random.js';
import { endpoints } from './stores.js';

export { prng };

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = fileURLToPath(new URL('../../src/node/bin.ts', import.meta.url));

/** A node test's topics: a {@link KafkaTestbed}, an output topic with as many partitions, and a one-partition DLQ. */
export interface NodeTestbed extends KafkaTestbed {
  readonly output: string;
  readonly dlq: string;
}

/** Sets up a {@link NodeTestbed} (3 partitions unless told); everything is removed after the test. */
export async function nodeTestbed(
  t: TestContext,
  options: { partitions?: number } = {},
): Promise<NodeTestbed> {
  const bed = await kafkaTestbed(t, options);
  const output = await createTopic(t, bed.admin, {
    prefix: 'idem-node-out',
    ...(options.partitions === undefined ? {} : { partitions: options.partitions }),
  });
  const dlq = await createTopic(t, bed.admin, { prefix: 'idem-node-dlq', partitions: 1 });
  return { ...bed, output, dlq };
}

/** How a generated duplicate relates to its original. */
export type CopyKind = 'original' | 'same-batch' | 'later-batch' | 'other-partition';

/** One generated input record. `seq` is unique; `uid` is the dedup field and repeats for duplicates. */
export interface InputRecord {
  readonly seq: number;
  readonly uid: string;
  readonly key: string;
  readonly partition: number;
  /** Its offset once produced to a new topic. */
  offset: number;
  readonly kind: CopyKind;
}

/** Generated input, per partition in offset order. */
export interface DedupInput {
  readonly partitions: InputRecord[][];
  readonly bySeq: ReadonlyMap<number, InputRecord>;
  readonly distinct: number;
  readonly total: number;
}

/**
 * Records with about `duplicateShare` of them repeating an earlier uid, the copies split evenly between: the
 * same partition a few records later (same chunk), the same partition at least three chunks later, and another
 * partition under another key (a cross-partition duplicate only a shared store, or one instance, can catch).
 */
export function dedupInput(options: {
  records: number;
  duplicateShare: number;
  partitions: number;
  batchSize: number;
  seed?: number;
}): DedupInput {
  const random = prng(options.seed ?? 7);
  const P = options.partitions;
  const copies = Math.round(options.records * options.duplicateShare);
  const distinct = options.records - copies;
  // Each record gets a position in its partition; sorting by position gives the partition's order.
  const placed: { record: InputRecord; at: number }[][] = Array.from({ length: P }, () => []);
  const originals: { record: InputRecord; at: number }[] = [];
  let seq = 0;
  for (let i = 0; i < distinct; i++) {
    const partition = i % P;
    const record: InputRecord = {
      seq: seq++,
      uid: `u-${i}`,
      key: `k-${i}`,
      partition,
      offset: -1,
      kind: 'original',
    };
    const entry = { record, at: Math.floor(i / P) };
    placed[partition]?.push(entry);
    originals.push(entry);
  }
  const perPartition = distinct / P;
  const kinds: CopyKind[] = ['same-batch', 'later-batch', 'other-partition'];
  for (let j = 0; j < copies; j++) {
    const kind = kinds[j % kinds.length] as CopyKind;
    const original = originals[Math.floor(random() * originals.length)] as (typeof originals)[number];
    const o = original.record;
    let partition = o.partition;
    let key = o.key;
    let at: number;
    if (kind === 'same-batch') at = original.at + 0.5 + random() * 5;
    else if (kind === 'later-batch') {
      at = original.at + options.batchSize * 3 + random() * perPartition;
    } else {
      partition = (o.partition + 1 + Math.floor(random() * (P - 1))) % P;
      key = `x-${j}`;
      at = original.at + (random() - 0.5) * options.batchSize * 4;
    }
    placed[partition]?.push({ record: { seq: seq++, uid: o.uid, key, partition, offset: -1, kind }, at });
  }
  const partitions = placed.map((list) => {
    list.sort((a, b) => a.at - b.at);
    return list.map((entry, offset) => {
      entry.record.offset = offset;
      return entry.record;
    });
  });
  const bySeq = new Map<number, InputRecord>();
  for (const list of partitions) for (const r of list) bySeq.set(r.seq, r);
  return { partitions, bySeq, distinct, total: seq };
}

/** The value of a generated record: the uid, the unique seq and some padding. */
export function inputValue(record: InputRecord): string {
  return `{"uid":"${record.uid}","seq":${record.seq},"payload":"${'p'.repeat(40)}"}`;
}

/** Produces the input in partition order (each partition's records in their offset order), 10k per request. */
export async function produceInput(producer: Producer, topic: string, input: DedupInput): Promise<void> {
  const chunk = 5_000;
  await Promise.all(
    input.partitions.map(async (records, partition) => {
      for (let i = 0; i < records.length; i += chunk) {
        await producer.send({
          topic,
          acks: -1, // the test producer is idempotent, which needs every in-sync replica's ack
          messages: records.slice(i, i + chunk).map((r) => ({
            key: r.key,
            value: inputValue(r),
            headers: { seq: String(r.seq) },
            partition,
          })),
        });
      }
    }),
  );
}

/** Checks that every partition holds exactly the generated records (their offsets are what the checks assume). */
export async function assertInputLanded(admin: Admin, topic: string, input: DedupInput): Promise<void> {
  const ends = await endOffsets(admin, topic);
  assert.deepEqual(
    input.partitions.map((_, p) => ends.get(p)),
    input.partitions.map((p) => p.length),
    'the input landed as generated',
  );
}

/** What the output holds, checked against the input. */
export interface OutputReport {
  readonly records: number;
  /** Distinct uids in the output. */
  readonly distinct: number;
  /** Output records beyond the first of their uid (leaked duplicates). */
  readonly leaked: number;
  /** Input uids missing from the output. */
  readonly missing: string[];
}

/**
 * Reads the output and checks each record against the input record it copies (found by its `seq`): same
 * partition, key and `seq` header, and the first output of each uid in input order. Returns the counts; the
 * caller asserts on them. With `ordered` (no crash), also checks that each partition's whole output follows its
 * input order and that the survivor of a uid repeated within one partition is the first copy there.
 */
export async function readOutput(
  kafka: Kafka,
  topic: string,
  input: DedupInput,
  options: { ordered?: boolean } = {},
): Promise<OutputReport> {
  const records = await consumeAll(kafka, topic, { timeoutMs: 120_000 });
  const count = new Map<string, number>();
  const lastOffset = new Map<number, number>();
  const lastFirst = new Map<number, number>();
  for (const record of records) {
    const { seq } = JSON.parse(record.value?.toString() ?? '') as { seq: number };
    const source = input.bySeq.get(seq);
    assert.ok(source, `output record seq ${seq} is not an input record`);
    assert.equal(record.partition, source.partition, `seq ${seq}: output partition = input partition`);
    assert.equal(record.key?.toString(), source.key, `seq ${seq}: key kept`);
    assert.equal(headerText(record.headers, 'seq'), String(seq), `seq ${seq}: headers kept`);
    if (!count.has(source.uid)) {
      // A crash repeats a chunk, but the first copy of each uid still comes out in input order.
      const before = lastFirst.get(record.partition) ?? -1;
      assert.ok(
        source.offset > before,
        `partition ${record.partition}: first output of input offset ${source.offset} after ${before}`,
      );
      lastFirst.set(record.partition, source.offset);
    }
    count.set(source.uid, (count.get(source.uid) ?? 0) + 1);
    if (options.ordered) {
      const before = lastOffset.get(record.partition) ?? -1;
      assert.ok(
        source.offset > before,
        `partition ${record.partition}: input offset ${source.offset} written after ${before}`,
      );
      lastOffset.set(record.partition, source.offset);
    }
  }
  if (options.ordered) assertFirstCopiesWin(records, input);
  const missing: string[] = [];
  for (const list of input.partitions) {
    for (const r of list) if (r.kind === 'original' && !count.has(r.uid)) missing.push(r.uid);
  }
  return { records: records.length, distinct: count.size, leaked: records.length - count.size, missing };
}

/** Within one partition, a repeated uid must be forwarded as its first copy there. */
function assertFirstCopiesWin(records: readonly ConsumedRecord[], input: DedupInput): void {
  const first = new Map<string, number>();
  for (const list of input.partitions) {
    for (const r of list) {
      const k = `${r.partition}/${r.uid}`;
      if (!first.has(k)) first.set(k, r.seq);
    }
  }
  for (const record of records) {
    const { seq } = JSON.parse(record.value?.toString() ?? '') as { seq: number };
    const source = input.bySeq.get(seq) as InputRecord;
    assert.equal(seq, first.get(`${source.partition}/${source.uid}`), `uid ${source.uid}: first copy wins`);
  }
}

/** Options of {@link nodeConfig}. */
export interface NodeConfigParts {
  readonly topic: string;
  readonly groupId: string;
  readonly output: string;
  readonly dlq: string;
  /** `[repository]`: defaults to Redis at REDIS_URL under `keyPrefix`. */
  readonly repository: Record<string, unknown>;
  readonly batchSize?: number;
  readonly metricsPort?: number | false;
  readonly perfInterval?: string;
  readonly extra?: Record<string, Record<string, unknown>>;
}

/** A node config for tests: short session timeout (quick rejoin after a kill), metrics off unless asked. */
export function nodeConfig(parts: NodeConfigParts): NodeConfigInput {
  const config: Record<string, Record<string, unknown>> = {
    kafka: {
      brokers: [...endpoints.kafkaBrokers],
      // The client under test (IDEM_KAFKA_CLIENT), so every node suite runs on either.
      client: testKafkaClientName(),
      clientId: 'idem-node-test',
      sessionTimeout: '6s',
    },
    input: {
      topic: parts.topic,
      groupId: parts.groupId,
      batchSize: parts.batchSize ?? 500,
      batchTimeout: '200ms',
    },
    output: { topic: parts.output, retryBackoff: '100ms' },
    dlq: { topic: parts.dlq },
    dedup: { id: 'uid' },
    repository: parts.repository,
    metrics:
      parts.metricsPort === undefined || parts.metricsPort === false
        ? { enabled: false }
        : { port: parts.metricsPort },
    perf: { interval: parts.perfInterval ?? '10s' },
  };
  for (const [section, values] of Object.entries(parts.extra ?? {})) {
    config[section] = { ...config[section], ...values };
  }
  return config as NodeConfigInput;
}

/** A Redis `[repository]` table under a random key prefix, whose keys are deleted after the test. */
export function redisRepository(t: TestContext, prefix: string): Record<string, unknown> {
  const table = { type: 'redis', url: endpoints.redisUrl, keyPrefix: `${prefix}:` };
  onCleanup(t, async () => {
    const repository = await openRepository({ repository: table as never });
    await repository.clear();
    await repository.close();
  });
  return table;
}

/** A RocksDB `[repository]` table in a temporary directory, removed after the test. */
export async function rocksdbRepository(t: TestContext): Promise<Record<string, unknown>> {
  const dir = await tempDir(t, 'idem-node-rocksdb-');
  return { type: 'rocksdb', path: join(dir, 'store') };
}

/** A temporary directory removed after the test. */
export async function tempDir(t: TestContext, prefix = 'idem-node-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  onCleanup(t, () => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Writes the config as TOML into a temporary directory and returns its path. */
export async function writeNodeConfig(t: TestContext, config: NodeConfigInput): Promise<string> {
  const dir = await tempDir(t, 'idem-node-config-');
  const path = join(dir, 'node.toml');
  await writeFile(path, stringify(config as Record<string, unknown>));
  return path;
}

/** One JSON log line of the node (pino). */
export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/** The node running as a child process. */
export interface NodeProcess {
  readonly child: ChildProcess;
  /** Every log line so far. */
  readonly logs: LogLine[];
  /** What the process wrote to stderr so far, in chunks. */
  readonly stderr: readonly string[];
  /** Settles with the exit code (or the signal) once the process is gone. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first log line (past or future) matching; rejects after `timeoutMs` or on exit. */
  waitForLog(match: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
  /** Sends the signal once the node has logged a line (its signal handlers are installed), and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `src/node/bin.ts --config <path>`; SIGKILLed after the test if still running. */
export function startNodeProcess(
  t: TestContext,
  configPath: string,
  env: Record<string, string> = {},
): NodeProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', BIN, '--config', configPath], {
    cwd: ROOT,
    env: { ...process.env, IDEM_CONFIG: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: LogLine[] = [];
  const stderr: string[] = [];
  let pending = '';
  // IDEM_TEST_NODE_LOGS=<dir>: every node process's log lines also go to <dir>/node-<pid>.log, to read after a run.
  const logDir = process.env.IDEM_TEST_NODE_LOGS;
  if (logDir) mkdirSync(logDir, { recursive: true });
  const logFile = logDir ? join(logDir, `node-${child.pid}.log`) : undefined;
  child.stdout?.setEncoding('utf8').on('data', (text: string) => {
    if (logFile) appendFileSync(logFile, text);
    pending += text;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const line of lines) {
      if (line.trim() === '') continue;
      try {
        logs.push(JSON.parse(line) as LogLine);
      } catch {
        logs.push({ level: 0, msg: line });
      }
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (text: string) => stderr.push(text));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  onCleanup(t, async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  return {
    child,
    logs,
    stderr,
    exited,
    async waitForLog(match, timeoutMs = 60_000) {
      let found: LogLine | undefined;
      await waitFor(
        () => {
          found = logs.find(match);
          if (!found && gone) {
            throw new Error(`node exited before the log line; stderr: ${stderr.join('').slice(-2000)}`);
          }
          return found !== undefined;
        },
        { timeoutMs, intervalMs: 50, what: 'a node log line' },
      ).catch((error: Error) => {
        // Which line was awaited is in the stack; what the node said last tells why it never came.
        const last = logs.slice(-8).map((l) => `  ${l.msg}`);
        error.message += `; the node's last log lines:\n${last.join('\n')}`;
        throw error;
      });
      return found as LogLine;
    },
    async stop(signal = 'SIGTERM') {
      // The node installs its signal handlers before it logs anything; a signal that arrives while the process
      // is still loading its modules kills it by default (seen in CI: a restarted node stopped at once because
      // its predecessor had already committed the whole input).
      if (!gone && logs.length === 0) {
        await waitFor(() => logs.length > 0 || gone, {
          timeoutMs: 60_000,
          intervalMs: 50,
          what: "the node's first log line",
        });
      }
      if (!gone) child.kill(signal);
      return exited;
    },
  };
}

/** A node started in this process (its logs collected), stopped after the test. */
export interface InProcessNode {
  readonly handle: DedupNodeHandle;
  readonly config: NodeConfig;
  readonly logs: LogLine[];
}

/** Starts a node in this process from a test config; its repository is opened from `[repository]`. */
export async function startNodeInProcess(t: TestContext, input: NodeConfigInput): Promise<InProcessNode> {
  const config = nodeConfigSchema.parse(input);
  const logs: LogLine[] = [];
  const logger = pino(
    { level: 'info' },
    { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) },
  );
  const repository = await openRepository(config);
  const handle = await startDedupNode(config, repository, logger).catch(async (error: unknown) => {
    await repository.close();
    throw error;
  });
  onCleanup(t, () => handle.stop());
  return { handle, config, logs };
}

/**
 * Waits until the node forwards records (a perf line with rows out), or until the group has committed the whole
 * input, so there is nothing left to forward (a quick machine drains the input before a kill loop ends).
 * Resolves true when drained.
 */
export async function forwardingOrDrained(
  node: NodeProcess,
  admin: Admin,
  groupId: string,
  topic: string,
  timeoutMs = 90_000,
): Promise<boolean> {
  const ends = await endOffsets(admin, topic);
  let drained = false;
  await waitFor(
    async () => {
      if (node.logs.some((l) => ((l.perf as { rowsOut?: number } | undefined)?.rowsOut ?? 0) > 0))
        return true;
      const committed = await committedOffsets(admin, groupId, topic).catch(() => undefined);
      drained = committed !== undefined && [...ends].every(([p, end]) => committed.get(p) === end);
      return drained;
    },
    { timeoutMs, intervalMs: 200, what: 'the node to forward records (or the input to be committed)' },
  );
  return drained;
}
