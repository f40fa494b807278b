import type { KafkaMessage, Message, Producer } from 'kafkajs';
import type { Logger } from 'pino';
import { RepositoryError, toRepositoryError } from '../errors.js';
import {
  type DeadLetter,
  type DlqReason,
  type IdVerdict,
  messageIdReader as nodeIdReader,
  type RecordParts,
  sendDeadLetters,
} from '../kafka/index.js';
import type { IdempotentRepository } from '../repositories/types.js';
import type { NodeMetrics } from './metrics.js';
import type { NodeConfig } from './options.js';
import type { OutputWriter } from './output.js';
import type { PerfLog, Phase } from './perf-log.js';

/** Running counts since the node started (the metrics carry the same numbers). */
export interface NodeTotals {
  recordsIn: number;
  recordsOut: number;
  duplicates: number;
  withoutId: number;
  deadLettered: number;
  /** Records forwarded although another worker marked their id between this node's lookup and its mark. */
  raced: number;
  batches: number;
  commits: number;
}

/** A new, zeroed {@link NodeTotals}. */
export function emptyTotals(): NodeTotals {
  return {
    recordsIn: 0,
    recordsOut: 0,
    duplicates: 0,
    withoutId: 0,
    deadLettered: 0,
    raced: 0,
    batches: 0,
    commits: 0,
  };
}

/** A record the node will forward, with its dedup id (undefined: forwarded without dedup). */
interface Survivor {
  readonly message: KafkaMessage;
  readonly id: string | undefined;
}

/** A chunk after parse and lookup: what to forward and what to dead-letter. */
interface PreparedChunk {
  readonly topic: string;
  readonly partition: number;
  readonly size: number;
  readonly survivors: readonly Survivor[];
  readonly letters: DeadLetter[];
  readonly duplicates: number;
  readonly withoutId: number;
}

/** What {@link ChunkProcessor} works with. */
export interface ChunkDeps {
  readonly config: NodeConfig;
  readonly repository: IdempotentRepository;
  readonly output: OutputWriter;
  /** For dead letters (the output writer has its own reference to it). */
  readonly producer: Producer;
  readonly metrics: NodeMetrics;
  readonly perf: PerfLog;
  readonly totals: NodeTotals;
  readonly logger: Logger;
}

/**
 * The node's steps for one chunk of one partition, in order:
 * 1. parse: read each record's dedup id; unreadable records, and by default records without one, are set aside
 *    for the DLQ;
 * 2. lookup: one store call for the chunk's distinct ids; a record whose id is stored, or taken by an earlier
 *    record of the chunk, is a duplicate and dropped (first received wins);
 * 3. produce + deliver: write the survivors to the output, same partition, key, headers and timestamp, in
 *    order, and wait for the acks (records the output refuses for what they are join the dead letters);
 * 4. mark: one store call records the forwarded ids for `dedup.window`;
 * 5. send the dead letters.
 * When it resolves, the chunk's offsets may be committed.
 */
export class ChunkProcessor {
  readonly #deps: ChunkDeps;
  readonly #readId: (record: RecordParts) => IdVerdict;
  readonly #missingDetail: string;

  constructor(deps: ChunkDeps) {
    this.#deps = deps;
    this.#readId = nodeIdReader(deps.config.dedup.id);
    this.#missingDetail = `no dedup id at ${describeId(deps.config)}`;
  }

  /** Runs the steps for one chunk; rejects (nothing to commit) when a step fails. */
  async handle(topic: string, partition: number, chunk: readonly KafkaMessage[]): Promise<void> {
    await this.#finish(await this.#prepare(topic, partition, chunk));
  }

  /** Steps 1 and 2. */
  async #prepare(topic: string, partition: number, chunk: readonly KafkaMessage[]): Promise<PreparedChunk> {
    const { config, perf } = this.#deps;
    const forwardMissing = config.dedup.missingId === 'forward';
    let t = performance.now();

    const letters: DeadLetter[] = [];
    const candidates: Survivor[] = [];
    const distinct = new Set<string>();
    let withoutId = 0;
    for (const message of chunk) {
      const verdict = this.#readId(message);
      if (!verdict.ok) {
        letters.push(letter(topic, partition, message, verdict.reason, verdict.detail));
      } else if (verdict.id !== undefined) {
        candidates.push({ message, id: verdict.id });
        distinct.add(verdict.id);
      } else {
        withoutId++;
        if (forwardMissing) candidates.push({ message, id: undefined });
        else letters.push(letter(topic, partition, message, 'no-id', this.#missingDetail));
      }
    }
    const now = performance.now();
    perf.add('parse', now - t);
    t = now;

    // One store call for the distinct ids. The first record of a new id takes it; every other record of that
    // id (stored already, or earlier in the chunk) is a duplicate.
    const unique = [...distinct];
    const seen = await this.#lookup(unique);
    const fresh = new Set<string>();
    for (let j = 0; j < unique.length; j++) if (!seen[j]) fresh.add(unique[j] as string);
    const survivors: Survivor[] = [];
    for (const c of candidates) if (c.id === undefined || fresh.delete(c.id)) survivors.push(c);
    perf.add('lookup', performance.now() - t);
    return {
      topic,
      partition,
      size: chunk.length,
      survivors,
      letters,
      duplicates: candidates.length - survivors.length,
      withoutId,
    };
  }

  /** Steps 3 to 5. */
  async #finish(chunk: PreparedChunk): Promise<void> {
    const { config, output, producer, metrics, perf, totals, logger } = this.#deps;
    const { topic, partition, survivors, letters } = chunk;
    let t = performance.now();
    const tick = (phase: Exclude<Phase, 'poll'>) => {
      const now = performance.now();
      perf.add(phase, now - t);
      t = now;
    };

    const outgoing: Message[] = new Array(survivors.length);
    for (let i = 0; i < survivors.length; i++) {
      const { message } = survivors[i] as Survivor;
      outgoing[i] = {
        key: message.key,
        value: message.value,
        headers: message.headers,
        timestamp: message.timestamp,
        partition,
      };
    }
    tick('produce');
    const refused = await output.write(partition, outgoing);
    let refusedAt: Set<number> | undefined;
    if (refused.length > 0) {
      refusedAt = new Set();
      for (const r of refused) {
        refusedAt.add(r.index);
        const { message } = survivors[r.index] as Survivor;
        letters.push({
          ...letter(topic, partition, message, 'handler-failed', r.error),
          attempts: r.attempts,
        });
      }
      logger.warn(
        { topic, partition, count: refused.length, err: refused[0]?.error },
        'output refused records',
      );
    }
    tick('deliver');

    // A refused record is not marked: once the output can take it, a replay of it is not a duplicate.
    const toMark: string[] = [];
    for (let i = 0; i < survivors.length; i++) {
      const id = (survivors[i] as Survivor).id;
      if (id !== undefined && !refusedAt?.has(i)) toMark.push(id);
    }
    const raced = await this.#mark(toMark);
    tick('mark');

    // Dead letters last: a failure here repeats the chunk, and the marks turn its forwarded records into
    // duplicates instead of second copies.
    if (letters.length > 0) {
      await sendDeadLetters(producer, config.dlq.topic, letters);
      for (const l of letters) metrics.deadLetters.inc({ reason: l.reason });
      logger.warn(
        { topic, partition, count: letters.length, reasons: [...new Set(letters.map((l) => l.reason))] },
        'records sent to the DLQ',
      );
      tick('deliver');
    }

    const out = survivors.length - refused.length;
    metrics.recordsIn.inc(chunk.size);
    metrics.recordsOut.inc(out);
    metrics.duplicates.inc(chunk.duplicates);
    metrics.noId.inc(chunk.withoutId);
    totals.recordsIn += chunk.size;
    totals.recordsOut += out;
    totals.duplicates += chunk.duplicates;
    totals.withoutId += chunk.withoutId;
    totals.deadLettered += letters.length;
    if (raced > 0) {
      metrics.raced.inc(raced);
      totals.raced += raced;
      logger.warn({ topic, partition, raced }, 'ids marked by another worker while this node forwarded them');
    }
    perf.rows(chunk.size, out, chunk.duplicates);
  }

  /** Store read: which ids are live. Under `storeFailure = process`, a failure makes every id new. */
  async #lookup(ids: readonly string[]): Promise<readonly boolean[]> {
    if (ids.length === 0) return [];
    const { repository, metrics, logger } = this.#deps;
    const start = performance.now();
    try {
      return await repository.containsMany(ids);
    } catch (error) {
      const failure = this.#storeFailure('lookup', error);
      logger.warn(
        { err: failure },
        'store lookup failed; the chunk is forwarded as new (storeFailure = process)',
      );
      return ids.map(() => false);
    } finally {
      metrics.storeSeconds.observe({ operation: 'lookup' }, (performance.now() - start) / 1000);
    }
  }

  /** Store write: marks forwarded ids; returns how many another worker had marked since our lookup. */
  async #mark(ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const { repository, metrics, logger, config } = this.#deps;
    const start = performance.now();
    try {
      const results = await repository.addMany(
        ids.map((id) => ({ id })),
        { ttlMs: config.dedup.window },
      );
      let raced = 0;
      for (const r of results) if (!r.added) raced++;
      return raced;
    } catch (error) {
      const failure = this.#storeFailure('mark', error);
      logger.warn({ err: failure }, 'store mark failed; the chunk stays forwarded (storeFailure = process)');
      return 0;
    } finally {
      metrics.storeSeconds.observe({ operation: 'mark' }, (performance.now() - start) / 1000);
    }
  }

  /** Raises a store error under `storeFailure = fail` (the batch is retried); counts and returns it otherwise. */
  #storeFailure(operation: 'lookup' | 'mark', error: unknown): RepositoryError {
    const failure = toRepositoryError(operation, error);
    if (this.#deps.config.dedup.storeFailure === 'fail' || !(failure instanceof RepositoryError))
      throw failure;
    this.#deps.metrics.storeFailures.inc({ operation });
    return failure;
  }
}

function letter(
  topic: string,
  partition: number,
  message: KafkaMessage,
  reason: DlqReason,
  error: unknown,
): DeadLetter {
  return { topic, partition, message, reason, error, attempts: 0 };
}

function describeId(config: NodeConfig): string {
  const id = config.dedup.id;
  return id.from === 'value'
    ? `value path ${id.path}`
    : id.from === 'header'
      ? `header ${id.name}`
      : 'the record key';
}
