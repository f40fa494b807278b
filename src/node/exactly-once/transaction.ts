import { sendChanges } from '../../kafka/changelog/index.js';
import { type DeadLetter, deadLetterMessage } from '../../kafka/index.js';
import type {
  GroupMetadata,
  GroupMetadataSource,
  KafkaProducer,
  KafkaTransaction,
  ProduceRequest,
  ProduceResult,
} from '../../kafka/port/index.js';
import type { ChangelogChange, ChangelogSink, LoggedRepository } from '../../repositories/logged/index.js';
import type { ChunkEnd, ChunkSink } from '../chunk.js';
import { GenerationMovedError, sameGeneration } from './producers.js';

/** What an exactly-once chunk needs to know about its partition. */
export interface TransactionTarget {
  readonly producer: KafkaProducer;
  /**
   * The input's consumer group (the node's consumer): its offsets join the transaction, with its generation when
   * the client sends one (fencesByGroup).
   */
  readonly group: GroupMetadataSource;
  readonly inputTopic: string;
  readonly partition: number;
  readonly changelogTopic: string;
  readonly dlqTopic: string;
  /**
   * The partition's logged view of the local store: the chunk's engine writes go to it, staged in this chunk's
   * transaction (see LoggedRepository), and reach the local store only after the commit.
   */
  readonly store: LoggedRepository;
}

/** What an exactly-once chunk left behind once committed. */
export interface CommittedChunk {
  /** The changelog offset after this chunk's changes (undefined: it wrote none). */
  readonly changelogNext: number | undefined;
  /** How many changelog records it wrote. */
  readonly marks: number;
}

/**
 * The changelog of an exactly-once partition's logged store: its changes go only into a chunk's transaction
 * ({@link ChunkTransaction.finish}), never on their own. A write outside a chunk is a bug in the node, refused.
 */
export class TransactionOnlySink implements ChangelogSink {
  constructor(readonly partition: number) {}

  async append(_changes: readonly ChangelogChange[]): Promise<void> {
    throw new TypeError(
      `exactly-once partition ${this.partition}: a store write outside a chunk transaction (nothing was written)`,
    );
  }

  async clear(): Promise<void> {
    throw new TypeError(`exactly-once partition ${this.partition}: the changelog is not cleared by the node`);
  }
}

/**
 * One chunk's Kafka transaction: begun by the first output request (or at the end, for a chunk that forwards
 * nothing), it carries the output records, the chunk's changelog records (changelog partition = input
 * partition: whatever the logged store staged, through every write verb), its dead letters and its input offset,
 * and is committed at the end. Only then do the staged changes reach the local store. Any failure aborts it (best
 * effort: a new owner's or a restarted producer's init aborts it anyway), and the staged changes are dropped.
 */
export class ChunkTransaction implements ChunkSink {
  readonly #target: TransactionTarget;
  /** The group generation the chunk was read in: its offsets are only sent in that one. */
  readonly #generation: GroupMetadata;
  #tx: KafkaTransaction | undefined;
  /** Set once committed. */
  committed: CommittedChunk | undefined;
  /**
   * The chunk failed and its transaction did not end in a known abort: the producer must be started again (its
   * init aborts whatever is still open) and the partition restored (the changelog says whether it committed).
   */
  needsNewProducer = false;

  constructor(target: TransactionTarget) {
    this.#target = target;
    this.#generation = target.group.groupMetadata();
    // A chunk that failed before its sink heard of it left its changes staged: they belong to no transaction.
    if (target.store.inTransaction) target.store.rollback();
    target.store.begin();
  }

  /** Output and dead-letter requests join the transaction. */
  readonly sender = {
    send: async (request: ProduceRequest): Promise<ProduceResult[]> => (await this.#begin()).send(request),
  };

  async #begin(): Promise<KafkaTransaction> {
    this.#tx ??= await this.#target.producer.transaction();
    return this.#tx;
  }

  async finish(end: ChunkEnd): Promise<void> {
    const target = this.#target;
    const tx = await this.#begin();
    const changes = target.store.staged();
    let changelogNext: number | undefined;
    if (changes.length > 0) {
      changelogNext = await sendChanges(
        tx,
        { topic: target.changelogTopic, partition: target.partition },
        changes,
      );
    }
    if (end.letters.length > 0) await sendLetters(tx, target.dlqTopic, end.letters);
    // The member rejoined while the chunk ran: in the new generation another instance may have had the
    // partition in between, so these offsets (and the chunk's output) must not commit under it.
    const now = target.group.groupMetadata();
    if (!sameGeneration(this.#generation, now)) throw new GenerationMovedError(this.#generation, now);
    await tx.sendOffsets({
      group: target.group,
      topics: [
        { topic: target.inputTopic, partitions: [{ partition: target.partition, offset: end.nextOffset }] },
      ],
    });
    await tx.commit();
    this.committed = { changelogNext, marks: changes.length };
    // Committed: now the changes count. A crash before this line is repaired by the next restore.
    await target.store.commit();
  }

  /**
   * The chunk failed: its staged changes are dropped and its transaction aborted. False when that is not known
   * to have happened ({@link needsNewProducer}).
   */
  async fail(): Promise<boolean> {
    if (this.committed === undefined) this.#target.store.rollback();
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
}

async function sendLetters(
  tx: KafkaTransaction,
  topic: string,
  letters: readonly DeadLetter[],
): Promise<void> {
  await tx.send({ topic, acks: -1, messages: letters.map(deadLetterMessage) });
}
