import type { GroupMetadata, GroupMetadataSource } from './producer.js';
import type { ConsumedMessage } from './records.js';

/** Options of {@link KafkaClient.consumer}. */
export interface GroupConsumerOptions {
  readonly groupId: string;
  /** How long a killed or stuck member keeps its partitions, in ms; default the client's (kafkajs: 30 s). */
  readonly sessionTimeoutMs?: number;
  readonly heartbeatIntervalMs?: number;
  /** Longest fetch long-poll, in ms. */
  readonly maxWaitMs?: number;
  readonly maxBytesPerPartition?: number;
  readonly maxBytes?: number;
  /** Lets subscribing to a missing topic create it (if the broker allows); default false (the adapter sets it). */
  readonly allowAutoTopicCreation?: boolean;
  /**
   * Read the group's committed offsets with requireStable (KIP-447): a position waits until no open transaction
   * holds offsets of it (needed by a per-instance producer). kafkajs cannot ask for it and ignores it.
   */
  readonly requireStableOffsets?: boolean;
  /** Client-specific settings passed through (the adapter's kafkajs `consumerConfig`); unknown keys are ignored. */
  readonly extra?: Readonly<Record<string, unknown>>;
}

/** One fetched batch of one partition, for {@link GroupConsumer.run}'s handler, which commits what it finished. */
export interface ConsumedBatch {
  readonly topic: string;
  readonly partition: number;
  /** In offset order; control records (transaction markers) are left out. */
  readonly messages: readonly ConsumedMessage[];
  /** The partition's high watermark when fetched (read_uncommitted) or last stable offset, decimal. */
  readonly highWatermark: string;
  /** The offset of the batch's last record, control records included (commit `lastOffset() + 1` at the end). */
  lastOffset(): string;
  /** Keeps this member in the group during a long batch; rejects when the group is rebalancing. */
  heartbeat(): Promise<void>;
  /** Commits the group's offset of this partition: `nextOffset` is the next record to read. */
  commit(nextOffset: string): Promise<void>;
  /** Tells the client the records up to `offset` are handled (where a restarted fetch of this batch resumes). */
  resolveOffset(offset: string): void;
  /** False once the consumer stops: the handler should finish what it has and return. */
  isRunning(): boolean;
  /** True when a rebalance or a seek made the rest of this batch obsolete. */
  isStale(): boolean;
}

export interface TopicPartitions {
  readonly topic: string;
  readonly partitions: readonly number[];
}

/** The member joined the group (first join and after every rebalance). */
export interface GroupJoin {
  readonly memberId: string;
  readonly generationId: number | undefined;
  /** The member's whole assignment after this join; partitions it no longer holds were revoked (no other event). */
  readonly assignment: Readonly<Record<string, readonly number[]>>;
}

export interface ConsumerCrash {
  readonly error: Error;
  /** True when the client restarts the consumer itself; false when it stays down (the caller decides). */
  readonly restart: boolean;
}

/** Options of {@link GroupConsumer.run}. */
export interface RunOptions {
  /** Partitions whose batches are handled at once; one partition's batches are always handled in order. */
  readonly partitionsConsumedConcurrently: number;
  /**
   * One partition batch; a rejection makes the client fetch the partition again from its last commit, also one a
   * transaction made (read with {@link GroupConsumerOptions.requireStableOffsets}: its markers may not be down yet).
   */
  readonly eachBatch: (batch: ConsumedBatch) => Promise<void>;
}

/** A member with manual commits: `run` resolves once running; stop/disconnect wait for the batch in hand. */
export interface GroupConsumer extends GroupMetadataSource {
  readonly groupId: string;
  connect(): Promise<void>;
  subscribe(topics: readonly string[], fromBeginning: boolean): Promise<void>;
  run(options: RunOptions): Promise<void>;
  /** Stops consuming and leaves the group; stays connected (a stopped consumer can `run` again). */
  stop(): Promise<void>;
  disconnect(): Promise<void>;
  /** Stops fetching these partitions until resumed (their batch in hand finishes). */
  pause(partitions: readonly TopicPartitions[]): void;
  /** Resumes paused partitions; does nothing when the group is gone (a restarted consumer pauses nothing). */
  resume(partitions: readonly TopicPartitions[]): void;
  /** The current generation; `generationId`/`memberId` are undefined before the first join (and on kafkajs). */
  groupMetadata(): GroupMetadata;
  /** Each join of the group. Returns a function that removes the listener. */
  onGroupJoin(listener: (join: GroupJoin) => void): () => void;
  /** Each crash of the consumer (see {@link ConsumerCrash.restart}). */
  onCrash(listener: (crash: ConsumerCrash) => void): () => void;
  /** Each fetch round's start (the node's perf log counts input-starved rounds). */
  onFetchStart(listener: () => void): () => void;
  /** A warning through the client's own logger (the adapter's default `onError`). */
  warn(message: string, fields?: object): void;
}
