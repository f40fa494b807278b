import type { DlqReason } from '../../kafka/index.js';
import type { ConsumedMessage } from '../../kafka/port/index.js';
import type { BlockKind } from './retry.js';

/** What the handler is given: one Kafka record, where it was read, and its id as the adapter's `id` option reads it. */
export interface KafkaRecord {
  readonly topic: string;
  readonly partition: number;
  /** The record as consumed (the shape of a kafkajs `KafkaMessage` from a record batch, on every client). */
  readonly message: ConsumedMessage;
  /** The record timestamp in epoch ms (event-time mode reads it by default; -1 when the record has none). */
  readonly timestamp: number;
  /** Canonical id (as the stores key it); undefined when the record has none and is forwarded (KIP-655). */
  readonly id: string | undefined;
}

/** The id selector of the wrapped consumer: `new IdempotentConsumer<KafkaRecord>({ repository, id: kafkaRecordId })`. */
export const kafkaRecordId = (record: KafkaRecord): string | undefined => record.id;

/** Where and why a partition stopped, as passed to `onError`. */
export interface BlockInfo {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly kind: BlockKind;
  /** Handler failures of this record so far. */
  readonly attempts: number;
  /** Delay before the partition is tried again, in ms. */
  readonly retryInMs: number;
}

/** A record sent to the DLQ, as passed to `onDeadLetter`. */
export interface DeadLetterEvent {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly reason: DlqReason;
  readonly attempts: number;
}

/** Running counts of the adapter; the wrapped consumer's own `stats` count outcomes. */
export interface KafkaAdapterStats {
  /** `processBatch` calls. */
  batches: number;
  /** Records finished (handled, duplicate, forwarded without id, or dead-lettered) and so committable. */
  records: number;
  /** Times a partition was paused to retry a record later. */
  retries: number;
  /** Records written to the DLQ. */
  deadLettered: number;
  /** Offset commits acknowledged by the broker. */
  commits: number;
}
