import type { RecordSender } from './records.js';

/** Options of {@link KafkaClient.producer}. */
export interface ProducerOptions {
  /** Idempotent (one copy per send, in order, across the client's retries); a transactional one always is. */
  readonly idempotent?: boolean;
  /** Makes it transactional: {@link KafkaProducer.connect} initialises the id, fencing earlier producers of it. */
  readonly transactionalId?: string;
  /** The broker aborts a transaction open longer than this, in ms. */
  readonly transactionTimeoutMs?: number;
  /** Lets a send to a missing topic create it (if the broker allows); default false (the adapter's DLQ sets it). */
  readonly allowAutoTopicCreation?: boolean;
}

/** The consumer group generation an exactly-once commit is bound to (KIP-447). */
export interface GroupMetadata {
  readonly groupId: string;
  /** The group generation this member joined; undefined when the client does not know it (kafkajs). */
  readonly generationId?: number;
  readonly memberId?: string;
}

/** Anything that can say which group generation it consumes in: a {@link GroupConsumer}, or a fixed value. */
export interface GroupMetadataSource {
  /** Read when the offsets are sent, so that a member that rejoined sends its new generation. */
  groupMetadata(): GroupMetadata;
}

/** The input offsets a transaction commits with its output. */
export interface TransactionOffsets {
  /** The consuming group (its generation too where {@link KafkaClientCapabilities.fencesByGroup}). */
  readonly group: GroupMetadataSource;
  readonly topics: readonly {
    readonly topic: string;
    /** `offset` is the next offset to read (last handled + 1), as a decimal string. */
    readonly partitions: readonly { readonly partition: number; readonly offset: string }[];
  }[];
}

/**
 * First backoff after CONCURRENT_TRANSACTIONS, the answer to a transaction's first request while the last one's
 * markers are written (a few ms after every commit): 20 ms as Java's producer, where 300 ms slowed every chunk.
 */
export const CONCURRENT_TRANSACTIONS_RETRY_MS = 20;

/** What a transaction will write to, known when it opens. */
export interface TransactionPlan {
  readonly partitions: readonly { readonly topic: string; readonly partitions: readonly number[] }[];
  /** The group whose offsets it will commit. */
  readonly groupId: string;
}

/** An open Kafka transaction: its sends, its input offsets, then commit or abort. */
export interface KafkaTransaction extends RecordSender {
  /** Its requests join the transaction: a failed one is never sent again ({@link RecordSender.transactional}). */
  readonly transactional: true;
  /**
   * Optional: registers what `plan` names with the transaction at once (one AddPartitionsToTxn beside one
   * AddOffsetsToTxn), which each first send and `sendOffsets` would otherwise do one after another. A failure leaves
   * the transaction to be aborted, as a failed send does.
   */
  prepare?(plan: TransactionPlan): Promise<void>;
  /** Adds the consumer's offsets to the transaction (TxnOffsetCommit). */
  sendOffsets(offsets: TransactionOffsets): Promise<void>;
  commit(): Promise<void>;
  abort(): Promise<void>;
  /** False once a commit or abort was sent, even a failed one (then replace the producer: its init aborts). */
  isActive(): boolean;
}

/** A connected producer: plain sends, or (with a `transactionalId`) transactions. */
export interface KafkaProducer extends RecordSender {
  /** Connects; a transactional producer also initialises its id here (fencing older ones). */
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  /** Begins a transaction (transactional producers only; one at a time). */
  transaction(): Promise<KafkaTransaction>;
}
