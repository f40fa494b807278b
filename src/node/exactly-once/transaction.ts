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
   * The partition's logged view of the local store: the chunk's engine writes go to it, staged in the chunks'
   * transaction (see LoggedRepository), and reach the local store only after the commit.
   */
  readonly store: LoggedRepository;
}

/** What an exactly-once transaction left behind once committed. */
export interface CommittedChunk {
  /** The changelog offset after its changes (undefined: it wrote none). */
  readonly changelogNext: number | undefined;
  /** How many changelog records it wrote. */
  readonly marks: number;
}

/**
 * The changelog of an exactly-once partition's logged store: its changes go only into a chunk's transaction
 * ({@link ChunkTransaction.commit}), never on their own. A write outside a chunk is a bug in the node, refused.
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
 * One Kafka transaction over one or more consecutive chunks of one partition (as Kafka Streams commits once per
 * `commit.interval`, not per record): begun by the first output request (or at the commit, for chunks that forward
 * nothing), it carries their output records, their changelog records (changelog partition = input partition:
 * whatever the logged store staged, through every write verb; a later chunk's lookups see an earlier chunk's
 * staged marks), their dead letters and the input offset after the last of them, and is committed by
 * {@link commit}. Only then do the staged changes reach the local store, and the chunks count in the totals. Any
 * failure aborts it (best effort: a new owner's or a restarted producer's init aborts it anyway), and the staged
 * changes of all its chunks are dropped.
 *
 * Each chunk's changelog records join the transaction as the chunk finishes, without waiting for the broker: the
 * next chunk is parsed and looked up while they are written (sent all at the commit, they were a serial wait as
 * long as the chunks' own output). Nothing is visible before the commit, and the commit waits for every one of
 * them (and fails on the first that failed), so what commits is what it did before: all of the span's output,
 * marks and offset, or none.
 */
export class ChunkTransaction implements ChunkSink {
  readonly #target: TransactionTarget;
  /** The group generation the first chunk was read in: the offsets are only sent in that one. */
  readonly #generation: GroupMetadata;
  #tx: KafkaTransaction | undefined;
  /** The input offset after the last finished chunk (undefined: none finished yet). */
  #nextOffset: string | undefined;
  /** Chunks finish without committing (see {@link hold}). */
  #holding = false;
  /** The finished chunks' counts, taken at the commit. */
  readonly #counts: (() => void)[] = [];
  /** The staged changes before this index are in the transaction (sent, or queued in {@link #sends}). */
  #logged = 0;
  /** The changelog offset after the records sent so far (undefined: none). */
  #changelogNext: number | undefined;
  /**
   * The transaction's requests, one after another (as the producers run them anyway): a chunk's output waits only
   * for what is ahead of it, its caller for its own acks. Never rejects; see {@link #sendFailure}.
   */
  #sends: Promise<void> = Promise.resolve();
  /** A changelog request that failed: the transaction cannot commit, the next chunk or the commit raises it. */
  #sendFailure: { error: unknown } | undefined;
  /** Set once committed. */
  committed: CommittedChunk | undefined;
  /**
   * A chunk or the commit failed and the transaction did not end in a known abort: the producer must be started again (its
   * init aborts whatever is still open) and the partition restored (the changelog says whether it committed).
   */
  needsNewProducer = false;
  #failed = false;

  /** Neither committed nor failed: chunks may still join it, and it must still be committed or aborted. */
  get open(): boolean {
    return this.committed === undefined && !this.#failed;
  }

  constructor(target: TransactionTarget) {
    this.#target = target;
    this.#generation = target.group.groupMetadata();
    // A chunk that failed before its sink heard of it left its changes staged: they belong to no transaction.
    if (target.store.inTransaction) target.store.rollback();
    target.store.begin();
  }

  /** Output and dead-letter requests join the transaction (after its requests in flight). */
  readonly sender = {
    send: (request: ProduceRequest): Promise<ProduceResult[]> =>
      this.#enqueue(async () => (await this.#begin()).send(request)),
  };

  /** Runs `send` after the transaction's requests already queued; resolves or rejects with it. */
  #enqueue<T>(send: () => Promise<T>): Promise<T> {
    const result = this.#sends.then(send);
    this.#sends = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  /**
   * The changes staged since the last call join the transaction, queued without waiting for their acks (see the
   * class comment); a failure is kept for {@link #throwIfFailed}.
   */
  #log(): void {
    const target = this.#target;
    const changes = target.store.staged();
    if (changes.length === this.#logged) return;
    const batch = changes.slice(this.#logged);
    this.#logged = changes.length;
    const log = async () => {
      const next = await sendChanges(
        await this.#begin(),
        { topic: target.changelogTopic, partition: target.partition },
        batch,
      );
      this.#changelogNext = next ?? this.#changelogNext;
    };
    this.#enqueue(log).catch((error: unknown) => {
      this.#sendFailure ??= { error };
    });
  }

  /** A changelog request of this transaction failed: raises its error. */
  #throwIfFailed(): void {
    if (this.#sendFailure !== undefined) throw this.#sendFailure.error;
  }

  async #begin(): Promise<KafkaTransaction> {
    this.#tx ??= await this.#target.producer.transaction();
    return this.#tx;
  }

  /**
   * Chunks finished from now on leave the transaction open for the next one (true), or the next one to finish
   * commits it (false, the default: a transaction per chunk).
   */
  hold(open: boolean): void {
    this.#holding = open;
  }

  /**
   * One chunk is decided: its dead letters join the transaction, and its offset is the one to commit so far;
   * unless the transaction is held open, it commits (see {@link commit}).
   */
  async finish(end: ChunkEnd): Promise<void> {
    this.#throwIfFailed();
    if (end.letters.length > 0) await sendLetters(this.sender, this.#target.dlqTopic, end.letters);
    this.#nextOffset = end.nextOffset;
    this.#log();
    if (!this.#holding) await this.commit();
  }

  /** A finished chunk's counts, taken once the transaction has committed (an aborted chunk is read again). */
  onCommitted(count: () => void): void {
    if (this.committed) count();
    else this.#counts.push(count);
  }

  /**
   * Commits the transaction: the staged changelog records and the input offset after its last finished chunk
   * join it, then the staged changes reach the local store. On a failure the caller aborts it ({@link fail}).
   */
  async commit(): Promise<void> {
    await this.#commit();
    for (const count of this.#counts) count();
    this.#counts.length = 0;
  }

  async #commit(): Promise<void> {
    const target = this.#target;
    const nextOffset = this.#nextOffset;
    if (nextOffset === undefined)
      throw new TypeError('a chunk transaction committed before any chunk finished');
    // Whatever was staged since the last chunk (nothing, as a rule), then every request acknowledged.
    this.#log();
    await this.#sends;
    this.#throwIfFailed();
    const marks = target.store.staged().length;
    // Begun here when its chunks sent nothing (nothing is in flight now to begin it at the same time).
    const tx = await this.#begin();
    // The member rejoined while the chunks ran: in the new generation another instance may have had the
    // partition in between, so these offsets (and the chunks' output) must not commit under it.
    const now = target.group.groupMetadata();
    if (!sameGeneration(this.#generation, now)) throw new GenerationMovedError(this.#generation, now);
    await tx.sendOffsets({
      group: target.group,
      topics: [
        { topic: target.inputTopic, partitions: [{ partition: target.partition, offset: nextOffset }] },
      ],
    });
    await tx.commit();
    this.committed = { changelogNext: this.#changelogNext, marks };
    // Committed: now the changes count. A crash before this line is repaired by the next restore.
    await target.store.commit();
  }

  /**
   * A chunk (or the commit) failed: the staged changes of every chunk are dropped and the transaction aborted. False
   * when that is not known to have happened ({@link needsNewProducer}).
   */
  async fail(): Promise<boolean> {
    this.#failed = true;
    if (this.committed === undefined) this.#target.store.rollback();
    // Its requests in flight end first: an abort must not overtake them (they fail or land in the aborted one).
    await this.#sends;
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
  sender: ChunkTransaction['sender'],
  topic: string,
  letters: readonly DeadLetter[],
): Promise<void> {
  await sender.send({ topic, acks: -1, messages: letters.map(deadLetterMessage) });
}
