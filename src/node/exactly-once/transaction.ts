import type { Message, Producer, ProducerRecord, RecordMetadata, Transaction } from 'kafkajs';
import { encodeMark } from '../../kafka/changelog/index.js';
import { type DeadLetter, deadLetterMessage } from '../../kafka/index.js';
import { markIds } from '../../repositories/mark.js';
import type { IdempotentRepository } from '../../repositories/types.js';
import type { ChunkEnd, ChunkSink } from '../chunk.js';
import { isFenced } from '../output.js';
import type { StagedMark } from './staged-marks.js';

/** Bytes of changelog records per request, below Kafka's default `max.message.bytes` (1 MiB). */
const CHANGELOG_REQUEST_BYTES = 512 * 1024;

/** What an exactly-once chunk needs to know about its partition. */
export interface TransactionTarget {
  readonly producer: Producer;
  readonly groupId: string;
  readonly inputTopic: string;
  readonly partition: number;
  readonly changelogTopic: string;
  readonly dlqTopic: string;
  /** The local store the committed marks are applied to. */
  readonly store: IdempotentRepository;
  /** The marks the chunk's engine asked for (see stagingRepository). */
  takeMarks(): StagedMark[];
}

/** What an exactly-once chunk left behind once committed. */
export interface CommittedChunk {
  /** The changelog offset after this chunk's marks (undefined: it wrote none). */
  readonly changelogNext: number | undefined;
  readonly marks: number;
}

/**
 * One chunk's Kafka transaction: begun by the first output request (or at the end, for a chunk that forwards
 * nothing), it carries the output records, the chunk's changelog marks (changelog partition = input partition),
 * its dead letters and its input offset, and is committed at the end. Only then are the marks applied to the
 * local store. Any failure aborts it (best effort: a new owner's or a restarted producer's init aborts it
 * anyway), and the marks are dropped.
 */
export class ChunkTransaction implements ChunkSink {
  readonly #target: TransactionTarget;
  #tx: Transaction | undefined;
  /** Set once committed. */
  committed: CommittedChunk | undefined;
  /**
   * The chunk failed and its transaction did not end in a known abort: the producer must be started again (its
   * init aborts whatever is still open) and the partition restored (the changelog says whether it committed).
   */
  needsNewProducer = false;

  constructor(target: TransactionTarget) {
    this.#target = target;
  }

  /** Output and dead-letter requests join the transaction. */
  readonly sender = {
    send: async (record: ProducerRecord): Promise<RecordMetadata[]> => (await this.#begin()).send(record),
  };

  async #begin(): Promise<Transaction> {
    this.#tx ??= await this.#target.producer.transaction();
    return this.#tx;
  }

  async finish(end: ChunkEnd): Promise<void> {
    const target = this.#target;
    const tx = await this.#begin();
    const marks = target.takeMarks();
    let changelogNext: number | undefined;
    if (marks.length > 0) changelogNext = await this.#sendMarks(tx, marks);
    if (end.letters.length > 0) await sendLetters(tx, target.dlqTopic, end.letters);
    await tx.sendOffsets({
      consumerGroupId: target.groupId,
      topics: [
        { topic: target.inputTopic, partitions: [{ partition: target.partition, offset: end.nextOffset }] },
      ],
    });
    await tx.commit();
    this.committed = { changelogNext, marks: marks.length };
    // Committed: now the marks count. A crash before this line is repaired by the next restore.
    await applyMarks(target.store, marks);
  }

  /**
   * The chunk failed: its marks are dropped and its transaction aborted. False when that is not known to have
   * happened ({@link needsNewProducer}).
   */
  async fail(): Promise<boolean> {
    this.#target.takeMarks();
    const tx = this.#tx;
    if (tx === undefined) return true;
    if (!tx.isActive()) {
      // Its commit (or an abort) was sent and failed: the outcome is unknown (the commit may have landed), and
      // kafkajs leaves the producer in COMMITTING/ABORTING, from which it never begins another transaction.
      // Seen after a broker restart: every retry of the batch failed on "Invalid transition" and the node stalled.
      this.needsNewProducer = true;
      return false;
    }
    try {
      await tx.abort();
      return true;
    } catch {
      this.needsNewProducer = true;
      return false;
    }
  }

  async #sendMarks(tx: Transaction, marks: readonly StagedMark[]): Promise<number> {
    const { changelogTopic, partition } = this.#target;
    const now = Date.now();
    let next = 0;
    let from = 0;
    while (from < marks.length) {
      const messages: Message[] = [];
      let bytes = 0;
      let to = from;
      for (; to < marks.length && (to === from || bytes < CHANGELOG_REQUEST_BYTES); to++) {
        const mark = marks[to] as StagedMark;
        bytes += Buffer.byteLength(mark.key) + 40;
        messages.push({ key: mark.key, value: encodeMark({ expiresAt: now + mark.ttlMs }), partition });
      }
      const [meta] = await tx.send({ topic: changelogTopic, acks: -1, messages });
      next = Number(meta?.baseOffset ?? 0) + messages.length;
      from = to;
    }
    return next;
  }
}

async function sendLetters(tx: Transaction, topic: string, letters: readonly DeadLetter[]): Promise<void> {
  await tx.send({ topic, acks: -1, messages: letters.map(deadLetterMessage) });
}

/** Applies committed marks to the local store, grouped by lifetime (one store call in the usual case). */
export async function applyMarks(store: IdempotentRepository, marks: readonly StagedMark[]): Promise<void> {
  if (marks.length === 0) return;
  const byTtl = new Map<number, StagedMark[]>();
  for (const mark of marks) {
    const list = byTtl.get(mark.ttlMs);
    if (list) list.push(mark);
    else byTtl.set(mark.ttlMs, [mark]);
  }
  for (const [ttlMs, list] of byTtl) {
    await markIds(
      store,
      list.map((m) => ({ id: m.id })),
      ttlMs,
    );
  }
}

export { isFenced };
