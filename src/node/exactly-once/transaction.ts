import { RepositoryClosedError } from '../../errors.js';
import { sendChanges } from '../../kafka/changelog/index.js';
import { sendDeadLetters } from '../../kafka/index.js';
import {
  type GroupMetadata,
  type GroupMetadataSource,
  type KafkaProducer,
  type KafkaTransaction,
  type ProduceRequest,
  type ProduceResult,
  SerialQueue,
} from '../../kafka/port/index.js';
import type { ChangelogChange, ChangelogSink, LoggedRepository } from '../../repositories/logged/index.js';
import type { ChunkEnd, ChunkSink } from '../chunk.js';
import { GenerationMovedError, sameGeneration } from './producers.js';

export interface TransactionTarget {
  readonly producer: KafkaProducer;
  /** The input's consumer group: its offsets join the transaction, with its generation where the client sends one. */
  readonly group: GroupMetadataSource;
  readonly inputTopic: string;
  readonly partition: number;
  /** The output topic (its partition `partition` too): registered with the changelog's when the transaction opens. */
  readonly outputTopic?: string;
  readonly changelogTopic: string;
  readonly dlqTopic: string;
  /** The partition's logged store: the engine's writes are staged in it, applied locally after the commit. */
  readonly store: LoggedRepository;
}

/** A committed transaction: the changelog offset after its changes (undefined: none), and how many it wrote. */
export interface CommittedChunk {
  readonly changelogNext: number | undefined;
  readonly marks: number;
}

/** An exactly-once partition's changelog: its changes go only into a chunk's transaction; any other write is refused. */
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
 * One Kafka transaction over consecutive chunks of one partition: their output, changelog records (what the logged
 * store staged), dead letters and the input offset after the last. Only after {@link commit} do the staged changes
 * reach the local store and the chunks count. Each chunk's changelog records are sent unacked as it finishes.
 */
export class ChunkTransaction implements ChunkSink {
  readonly #target: TransactionTarget;
  /** The group generation the first chunk was read in: the offsets are only sent in that one. */
  readonly #generation: GroupMetadata;
  #tx: KafkaTransaction | undefined;
  /** The transaction, begun and prepared; rejects for good when either failed. */
  #opening: Promise<KafkaTransaction> | undefined;
  /** The input offset after the last finished chunk. */
  #nextOffset: string | undefined;
  #holding = false;
  readonly #counts: (() => void)[] = [];
  /** The staged changes before this index are in the transaction. */
  #logged = 0;
  #changelogNext: number | undefined;
  /** The transaction's requests, one after another; a changelog request's failure is kept in {@link #sendFailure}. */
  readonly #sends = new SerialQueue();
  /** A changelog request that failed: the next chunk or the commit raises it. */
  #sendFailure: { error: unknown } | undefined;
  committed: CommittedChunk | undefined;
  /** Not ended in a known abort: a new producer (its init aborts what is open) and a restore are needed. */
  needsNewProducer = false;
  #failed = false;

  /** Neither committed nor failed: it must still be committed or aborted. */
  get open(): boolean {
    return this.committed === undefined && !this.#failed;
  }

  constructor(target: TransactionTarget) {
    this.#target = target;
    this.#generation = target.group.groupMetadata();
    // A chunk that failed before its sink heard of it left changes staged that belong to no transaction.
    if (target.store.inTransaction) target.store.rollback();
    target.store.begin();
    // Opened now, so its registration travels while the first chunk is parsed; a failure surfaces at the first use.
    this.#begin().catch(() => undefined);
  }

  /** Output and dead-letter requests join the transaction, after its requests in flight. */
  readonly sender = {
    send: (request: ProduceRequest): Promise<ProduceResult[]> =>
      this.#sends.run(async () => (await this.#begin()).send(request)),
    transactional: true,
  };

  /** The changes staged since the last call join the transaction, queued; a failure is kept for the commit. */
  #log(): void {
    const target = this.#target;
    const changes = target.store.staged();
    if (changes.length === this.#logged) return;
    const batch = changes.slice(this.#logged);
    this.#logged = changes.length;
    const log = async () => {
      const next = await sendChanges(
        await this.#begin(),
        { topic: target.changelogTopic, partition: target.partition, pack: true },
        batch,
      );
      this.#changelogNext = next ?? this.#changelogNext;
    };
    this.#sends.run(log).catch((error: unknown) => {
      this.#sendFailure ??= { error };
    });
  }

  #begin(): Promise<KafkaTransaction> {
    this.#opening ??= this.#open();
    return this.#opening;
  }

  /** Begins the transaction and registers its partitions and offsets at once, where the client can. */
  async #open(): Promise<KafkaTransaction> {
    const { producer, group, partition, outputTopic, changelogTopic } = this.#target;
    const tx = await producer.transaction();
    this.#tx = tx;
    const topics = outputTopic === undefined ? [changelogTopic] : [outputTopic, changelogTopic];
    await tx.prepare?.({
      partitions: topics.map((topic) => ({ topic, partitions: [partition] })),
      groupId: group.groupMetadata().groupId,
    });
    return tx;
  }

  /** Chunks finished from now on leave the transaction open (true), or the next to finish commits it (false). */
  hold(open: boolean): void {
    this.#holding = open;
  }

  /** One chunk is decided: its dead letters and offset join the transaction, which commits unless held open. */
  async finish(end: ChunkEnd): Promise<void> {
    if (this.#sendFailure !== undefined) throw this.#sendFailure.error;
    if (end.letters.length > 0) await sendDeadLetters(this.sender, this.#target.dlqTopic, end.letters);
    this.#nextOffset = end.nextOffset;
    this.#log();
    if (!this.#holding) await this.commit();
  }

  /** A finished chunk's counts, taken once the transaction commits (an aborted chunk is read again). */
  onCommitted(count: () => void): void {
    if (this.committed) count();
    else this.#counts.push(count);
  }

  /** Commits the transaction, then applies the staged changes locally; on a failure the caller calls {@link fail}. */
  async commit(): Promise<void> {
    const target = this.#target;
    const nextOffset = this.#nextOffset;
    if (nextOffset === undefined)
      throw new TypeError('a chunk transaction committed before any chunk finished');
    this.#log();
    await this.#sends.idle();
    if (this.#sendFailure !== undefined) throw this.#sendFailure.error;
    const marks = target.store.staged().length;
    const tx = await this.#begin();
    // Rejoined while the chunks ran: another instance may have had the partition in between.
    const now = target.group.groupMetadata();
    if (!sameGeneration(this.#generation, now)) throw new GenerationMovedError(this.#generation, now);
    await tx.sendOffsets({
      group: target.group,
      topics: [
        { topic: target.inputTopic, partitions: [{ partition: target.partition, offset: nextOffset }] },
      ],
    });
    // Closed under the span (a join closes the partitions it may have lost): the changes staged since the last
    // chunk logged them were dropped, and output committed without its marks would let later copies through.
    if (target.store.closed) throw new RepositoryClosedError(`exactly-once partition ${target.partition}`);
    await tx.commit();
    this.committed = { changelogNext: this.#changelogNext, marks };
    for (const count of this.#counts) count();
    this.#counts.length = 0;
    // Committed: now the changes count. A crash before this line, or a close during the commit (this raises, so
    // the caller restores the partition instead of taking the marks as applied), is repaired by the next restore.
    await target.store.commit();
  }

  /** Drops every chunk's staged changes and aborts; false when the abort is not known to have happened. */
  async fail(): Promise<boolean> {
    this.#failed = true;
    if (this.committed === undefined) this.#target.store.rollback();
    // An abort must not overtake the requests in flight, its opening included.
    await this.#opening?.catch(() => undefined);
    await this.#sends.idle();
    const tx = this.#tx;
    if (tx === undefined) return true;
    // Not active: its commit or abort was sent and failed, so the outcome is unknown, and kafkajs leaves the
    // producer in COMMITTING/ABORTING, from which it never begins another transaction.
    let aborted = tx.isActive();
    if (aborted) await tx.abort().catch(() => (aborted = false));
    if (!aborted) this.needsNewProducer = true;
    return aborted;
  }
}
