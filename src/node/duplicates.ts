import type { DuplicateRecord, HandlerContext, ProcessResult } from '../consumer/types.js';
import { OutputError } from '../errors.js';
import type {
  ConsumedMessage,
  KafkaErrorClassifier,
  OutgoingMessage,
  RecordSender,
} from '../kafka/port/index.js';
import type { NodeConfig } from './options.js';
import { OutputWriter } from './output.js';

/** Kafka's default `max.message.bytes`: audit records are small. */
const AUDIT_MAX_BATCH_BYTES = 1_000_000;

/** A record as the chunk hands it to the engine: the Kafka message and its dedup key (undefined: no dedup). */
export interface Candidate {
  readonly message: ConsumedMessage;
  readonly id: string | undefined;
}

/** One JSON record of `output.duplicatesTopic`, keyed by the dedup id: a suppressed duplicate and its first copy. */
export interface DuplicateAuditValue {
  readonly id: string;
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  /** `stored` (marked by an earlier chunk or run), `in-flight` (another worker's claim), `batch` (this chunk). */
  readonly reason: DuplicateRecord['reason'];
  /** When the first copy was seen (its mark's time), ISO-8601; null when the store cannot tell. */
  readonly firstSeen: string | null;
  /** `batch`: the first copy's input offset, in this same chunk. */
  readonly firstOffset?: string;
}

/** `output.duplicatesTopic`: one record per dropped duplicate, partition p for input partition p. */
export class DuplicateAudit {
  /** Per candidate (the engine hands the hook the object it was given): its audit record. */
  readonly #records = new WeakMap<Candidate, DuplicateRecord>();

  readonly #writer: OutputWriter;

  constructor(
    readonly topic: string,
    output: Pick<NodeConfig['output'], 'sendAttempts' | 'retryBackoff'>,
    producer: RecordSender,
    errors: KafkaErrorClassifier,
  ) {
    this.#writer = new OutputWriter(producer, {
      topic,
      maxBatchBytes: AUDIT_MAX_BATCH_BYTES,
      sendAttempts: output.sendAttempts,
      retryBackoffMs: output.retryBackoff,
      errors,
    });
  }

  /** The consumer's `onDuplicate`. Chunks of several partitions may run at once: records are kept per candidate. */
  readonly hook = (candidate: Candidate, _context: HandlerContext, duplicate: DuplicateRecord): void => {
    this.#records.set(candidate, duplicate);
  };

  /** Writes one record per duplicate of the chunk, in order; a refused one fails the chunk. */
  async send(
    sender: RecordSender,
    topic: string,
    partition: number,
    candidates: readonly Candidate[],
    results: readonly ProcessResult[],
  ): Promise<void> {
    const messages: OutgoingMessage[] = [];
    for (let i = 0; i < results.length; i++) {
      const outcome = (results[i] as ProcessResult).outcome;
      if (outcome !== 'duplicate') continue;
      const candidate = candidates[i] as Candidate;
      const record = this.#records.get(candidate);
      this.#records.delete(candidate);
      const value: DuplicateAuditValue = {
        id: record?.id ?? (candidate.id as string),
        topic,
        partition,
        offset: candidate.message.offset,
        reason: record?.reason ?? 'stored',
        firstSeen: record?.firstSeen === undefined ? null : new Date(record.firstSeen).toISOString(),
        ...(record?.firstPlace === undefined ? {} : { firstOffset: String(record.firstPlace.offset) }),
      };
      messages.push({ key: value.id, value: JSON.stringify(value), timestamp: candidate.message.timestamp });
    }
    if (messages.length === 0) return;
    const refused = await this.#writer.write(partition, messages, sender);
    if (refused.length > 0) {
      throw new OutputError(
        `output.duplicatesTopic ${JSON.stringify(this.topic)} refused ${refused.length} audit records ` +
          `of ${topic}[${partition}]; the chunk is retried`,
        { cause: refused[0]?.error },
      );
    }
  }
}
