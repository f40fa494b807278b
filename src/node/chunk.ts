import type { Logger } from 'pino';
import { consumerFromConfig } from '../config/consumer.js';
import { goesOnAfter } from '../consumer/engine.js';
import type { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import { consumerConfigSchema } from '../consumer/options.js';
import type { BatchItem, ProcessResult, StoreCall } from '../consumer/types.js';
import {
  type DeadLetter,
  deadLetter,
  type IdVerdict,
  messageIdReader as nodeIdReader,
  type RecordParts,
  recordFate,
  sendDeadLetters,
} from '../kafka/index.js';
import type {
  ConsumedMessage,
  GroupConsumer,
  KafkaClient,
  KafkaProducer,
  OutgoingMessage,
  RecordSender,
} from '../kafka/port/index.js';
import { idOfKey } from '../store/ids.js';
import type { IdempotentRepository } from '../store/types.js';
import type { Candidate, DuplicateAudit } from './duplicates.js';
import type { NodeMetrics } from './metrics.js';
import type { NodeConfig } from './options.js';
import type { OutputWriter } from './output.js';
import type { PerfLog, Phase } from './perf-log.js';

/** Running counts since the node started (the metrics carry the same numbers, `raced` explained there). */
export const emptyTotals = () => ({
  recordsIn: 0,
  recordsOut: 0,
  duplicates: 0,
  withoutId: 0,
  deadLettered: 0,
  raced: 0,
  batches: 0,
  commits: 0,
});

export type NodeTotals = ReturnType<typeof emptyTotals>;

/** How a chunk ended: its dead letters, and the input offset to commit once it is done. */
export interface ChunkEnd {
  readonly topic: string;
  readonly partition: number;
  readonly letters: readonly DeadLetter[];
  readonly nextOffset: string;
}

/** Where one chunk's records go and how it ends: the producer (at-least-once), or its transaction (exactly-once). */
export interface ChunkSink {
  readonly sender: RecordSender;
  /** The chunk is decided (its output acknowledged, or sent in its transaction). */
  finish(end: ChunkEnd): Promise<void>;
  fail?(error: unknown): Promise<unknown>;
  /** Runs a finished chunk's counts once its output commits (default: when it finishes). */
  onCommitted?(count: () => void): void;
}

/** What every part of a running node shares; each part's deps pick the members it uses. */
export interface NodeRuntime {
  readonly kafka: KafkaClient;
  /** The node's idempotent producer: output, dead letters and, under at-least-once, the changelog. */
  readonly producer: KafkaProducer;
  /** The input's consumer: exactly-once transactions commit its offsets (with its generation, where sent). */
  readonly consumer: GroupConsumer;
  /** The store; with a changelog, the local cache that each partition's logged view writes through. */
  readonly repository: IdempotentRepository;
  readonly metrics: NodeMetrics;
  readonly perf: PerfLog;
  readonly totals: NodeTotals;
  readonly logger: Logger;
}

export interface ChunkDeps
  extends Pick<NodeRuntime, 'repository' | 'producer' | 'metrics' | 'perf' | 'totals' | 'logger'> {
  readonly dedup: NodeConfig['dedup'];
  readonly dlqTopic: string;
  /** `output.duplicatesTopic` (undefined: off). */
  readonly audit: DuplicateAudit | undefined;
  readonly output: OutputWriter;
}

/** The node has no `[consumer]` table: every consumer option comes from `[dedup]` (see the constructor). */
const NODE_CONSUMER_TABLE = consumerConfigSchema.parse({});

/** One chunk of a partition through the node's steps (startDedupNode); resolved, its offsets may commit. */
export class ChunkProcessor {
  readonly #deps: ChunkDeps;
  readonly #readId: (record: RecordParts) => IdVerdict;
  readonly #missingDetail: string;
  readonly #consumer: IdempotentConsumer<Candidate>;
  /** The at-least-once end of a chunk: the marks are in the store already, the dead letters follow. */
  readonly #atLeastOnce: ChunkSink;

  constructor(deps: ChunkDeps) {
    this.#deps = deps;
    const { producer, dedup, audit } = deps;
    this.#atLeastOnce = {
      sender: producer,
      finish: (end) => sendDeadLetters(producer, deps.dlqTopic, end.letters),
    };
    this.#readId = nodeIdReader(dedup.id);
    this.#missingDetail = `no dedup id at ${describeId(dedup.id)}`;
    // Built as the CLI and the DI container build consumers; the node's `[dedup]` table fixes the policies.
    this.#consumer = consumerFromConfig<Candidate>(NODE_CONSUMER_TABLE, deps.repository, {
      // The fast reader gives canonical keys; the consumer canonicalizes ids itself, so hand it the id back.
      id: (candidate) => (candidate.id === undefined ? undefined : idOfKey(candidate.id)),
      consumer: {
        mode: 'lazy',
        ttlMs: dedup.ttl,
        storeFailure: dedup.storeFailure,
        // A record held by another worker's live claim (a store shared with eager consumers) is theirs to handle.
        inProgress: 'duplicate',
        // Records without id reach the engine only under `dedup.missingId = "forward"` (parse letters the rest).
        nullId: 'forward',
        onWarning: (message, code) =>
          code === 'IDEM_NO_ID'
            ? deps.logger.warn(
                { code },
                `a whole chunk had ${this.#missingDetail} and was forwarded without dedup ` +
                  '(dedup.missingId = "forward"); check dedup.id',
              )
            : deps.logger.warn({ code }, message),
        // The node's effect is its output topic, not a row in the store's database: no SQL transaction.
        transaction: false,
        // `dedup.replayEpoch`: the marks (and so the changelog) carry the epoch's ids.
        ...(dedup.replayEpoch === undefined ? {} : { replayEpoch: dedup.replayEpoch }),
        ...(audit === undefined ? {} : { onDuplicate: audit.hook }),
      },
    });
  }

  /** Runs one chunk through `sink` (default: at-least-once); rejects, nothing to commit, when a step fails. */
  async handle(
    topic: string,
    partition: number,
    chunk: readonly ConsumedMessage[],
    sink: ChunkSink = this.#atLeastOnce,
  ): Promise<void> {
    try {
      const clock = new PhaseClock(this.#deps.perf);
      const { letters, candidates, withoutId } = this.#parse(topic, partition, chunk);
      clock.tick('parse');
      const { results, attempts } = await this.#forward(topic, partition, candidates, sink, clock);
      const tally = this.#tally(topic, partition, candidates, results, attempts, letters);
      // The audit of the dropped duplicates, through the chunk's sender: in its transaction under exactly-once.
      await this.#deps.audit?.send(sink.sender, topic, partition, candidates, results);
      // Dead letters last: a failure here repeats the chunk, and the marks make its forwarded records duplicates.
      const nextOffset = (BigInt((chunk[chunk.length - 1] as ConsumedMessage).offset) + 1n).toString();
      await sink.finish({ topic, partition, letters, nextOffset });
      clock.tick(sink === this.#atLeastOnce ? 'deliver' : 'commit');
      if (sink.onCommitted === undefined)
        this.#count(topic, partition, chunk.length, withoutId, letters, tally);
      else sink.onCommitted(() => this.#count(topic, partition, chunk.length, withoutId, letters, tally));
    } catch (error) {
      await sink.fail?.(error);
      throw error;
    }
  }

  /** Each record's dedup id; unreadable records, and by default records without one, become dead letters. */
  #parse(
    topic: string,
    partition: number,
    chunk: readonly ConsumedMessage[],
  ): { letters: DeadLetter[]; candidates: Candidate[]; withoutId: number } {
    const forwardMissing = this.#deps.dedup.missingId === 'forward';
    const letters: DeadLetter[] = [];
    const candidates: Candidate[] = [];
    let withoutId = 0;
    for (const message of chunk) {
      const verdict = this.#readId(message);
      if (!verdict.ok) {
        letters.push(deadLetter(topic, partition, message, verdict.reason, verdict.detail));
      } else if (verdict.id !== undefined) {
        candidates.push({ message, id: verdict.id });
      } else {
        withoutId++;
        if (forwardMissing) candidates.push({ message, id: undefined });
        else letters.push(deadLetter(topic, partition, message, 'no-id', this.#missingDetail));
      }
    }
    return { letters, candidates, withoutId };
  }

  /** The engine batch; resolves with its results and, for records the output refused, their attempts. */
  async #forward(
    topic: string,
    partition: number,
    candidates: readonly Candidate[],
    sink: ChunkSink,
    clock: PhaseClock,
  ): Promise<{ results: ProcessResult<unknown>[]; attempts: Map<number, number> }> {
    const { output, metrics, perf, logger } = this.#deps;
    const attempts = new Map<number, number>();
    // A failed output request fails the chunk: the engine would fail its items, sending them to the DLQ.
    let writeFailure: { error: unknown } | undefined;
    const produce = {
      batch: async (items: readonly BatchItem<Candidate>[]) => {
        clock.tick('lookup'); // the engine's decisions after the store read
        const outgoing: OutgoingMessage[] = new Array(items.length);
        for (let k = 0; k < items.length; k++) {
          const { message } = (items[k] as BatchItem<Candidate>).message;
          outgoing[k] = {
            key: message.key,
            value: message.value,
            headers: message.headers,
            timestamp: message.timestamp,
            partition,
          };
        }
        clock.tick('produce');
        let refused: Awaited<ReturnType<OutputWriter['write']>>;
        try {
          refused = await output.write(partition, outgoing, sink.sender);
        } catch (error) {
          writeFailure = { error };
          throw error;
        }
        clock.tick('deliver');
        if (refused.length === 0) return undefined;
        logger.warn(
          { topic, partition, count: refused.length, err: refused[0]?.error },
          'output refused records',
        );
        const failed = refused.map((r) => {
          const index = (items[r.index] as BatchItem<Candidate>).index;
          attempts.set(index, r.attempts);
          return { index, error: r.error };
        });
        return { failed };
      },
    };
    const onStoreCall = (call: StoreCall) => {
      const phase = call.operation === 'lookup' ? 'lookup' : 'mark';
      metrics.storeSeconds.observe({ operation: phase }, call.ms / 1000);
      perf.add(phase, call.ms);
      clock.reset();
      if (call.error === undefined) return;
      metrics.storeFailures.inc({ operation: phase });
      // A failure the engine does not go past (a store a join closed) fails the chunk; exactly-once aborts its output.
      const failOpen = goesOnAfter(this.#deps.dedup.storeFailure, call.error);
      logger.warn(
        { err: call.error, operation: phase },
        !failOpen
          ? `store ${phase} failed; the chunk fails and its records are read again`
          : phase === 'lookup'
            ? 'store lookup failed; the chunk is forwarded as new (storeFailure = process)'
            : 'store mark failed; the chunk stays forwarded (storeFailure = process)',
      );
    };
    const { results } = await this.#consumer.processBatch(candidates, produce, {
      onStoreCall,
      ...(this.#deps.audit && {
        placeOf: (i: number) => ({ topic, partition, offset: (candidates[i] as Candidate).message.offset }),
      }),
    });
    if (writeFailure !== undefined) throw writeFailure.error;
    return { results, attempts };
  }

  /** What the engine's results add up to; refused records (and ids no store can hold) join the dead letters. */
  #tally(
    topic: string,
    partition: number,
    candidates: readonly Candidate[],
    results: readonly ProcessResult<unknown>[],
    attempts: ReadonlyMap<number, number>,
    letters: DeadLetter[],
  ): ChunkTally {
    const tally: ChunkTally = { duplicates: 0, raced: 0, out: 0 };
    for (let i = 0; i < results.length; i++) {
      const r = results[i] as ProcessResult<unknown>;
      if (r.raced) tally.raced++;
      const refusedAttempts = attempts.get(i);
      const fate = recordFate(r, refusedAttempts !== undefined);
      // Another worker's live claim (not reported under `inProgress: 'duplicate'`) is theirs to forward.
      if (r.outcome === 'duplicate' || r.outcome === 'in-progress') tally.duplicates++;
      else if (fate.fate === 'ack') tally.out++;
      else {
        // Refused by the engine (an id no store can hold), or by the output: dead-lettered, not marked.
        const reason = fate.fate === 'dead-letter' ? fate.reason : 'handler-failed';
        const { message } = candidates[i] as Candidate;
        letters.push(deadLetter(topic, partition, message, reason, fate.error, refusedAttempts));
      }
    }
    return tally;
  }

  /** The finished chunk's counts: metrics, totals, the perf log, and warnings for dead letters and races. */
  #count(
    topic: string,
    partition: number,
    records: number,
    withoutId: number,
    letters: readonly DeadLetter[],
    { out, duplicates, raced }: ChunkTally,
  ): void {
    const { metrics, perf, totals, logger } = this.#deps;
    if (letters.length > 0) {
      for (const l of letters) metrics.deadLetters.inc({ reason: l.reason });
      logger.warn(
        { topic, partition, count: letters.length, reasons: [...new Set(letters.map((l) => l.reason))] },
        'records sent to the DLQ',
      );
    }
    metrics.recordsIn.inc(records);
    metrics.recordsOut.inc(out);
    metrics.duplicates.inc(duplicates);
    metrics.noId.inc(withoutId);
    totals.recordsIn += records;
    totals.recordsOut += out;
    totals.duplicates += duplicates;
    totals.withoutId += withoutId;
    totals.deadLettered += letters.length;
    if (raced > 0) {
      metrics.raced.inc(raced);
      totals.raced += raced;
      logger.warn({ topic, partition, raced }, 'ids marked by another worker while this node forwarded them');
    }
    perf.rows(records, out, duplicates);
  }
}

type ChunkTally = Record<'duplicates' | 'raced' | 'out', number>;

/** Each tick charges the time since the last to a phase of the perf log. */
class PhaseClock {
  #t = performance.now();
  constructor(readonly perf: PerfLog) {}
  tick(phase: Exclude<Phase, 'poll'>): void {
    const now = performance.now();
    this.perf.add(phase, now - this.#t);
    this.#t = now;
  }
  /** Starts counting again from now (a store call's own time was charged already). */
  reset(): void {
    this.#t = performance.now();
  }
}

function describeId(id: NodeConfig['dedup']['id']): string {
  return id.from === 'value'
    ? `value path ${id.path}`
    : id.from === 'header'
      ? `header ${id.name}`
      : 'the record key';
}
