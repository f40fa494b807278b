// The port's records, consumed and produced. kafkajs's own types fit them, so its hot path copies nothing.

/** Record headers: a value, or several values of one name, as bytes or text. */
export interface MessageHeaders {
  [name: string]: Buffer | string | (Buffer | string)[] | undefined;
}

/** A header's value, the last one of a repeated name (as Java's `headers.lastHeader(name)`). */
export function lastHeader(value: MessageHeaders[string]): Buffer | string | undefined {
  return Array.isArray(value) ? value[value.length - 1] : value;
}

/** One record as consumed. Offsets and timestamps are decimal strings (int64 on the wire). */
export interface ConsumedMessage {
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: MessageHeaders;
  /** Epoch milliseconds (create or log-append time), as a decimal string. */
  readonly timestamp: string;
  readonly offset: string;
  /** The record batch's attributes (compression, timestamp type, transactional, control). */
  readonly attributes: number;
}

export interface OutgoingMessage {
  readonly key?: Buffer | string | null;
  readonly value: Buffer | string | null;
  /** The partition to write to; without it the client's default partitioner places the record by key. */
  readonly partition?: number;
  readonly headers?: MessageHeaders;
  /** Epoch milliseconds as a decimal string; default: now. */
  readonly timestamp?: string;
}

/** One produce request: records for one topic. */
export interface ProduceRequest {
  readonly topic: string;
  readonly messages: readonly OutgoingMessage[];
  /** -1 (the default): acknowledged by every in-sync replica. */
  readonly acks?: -1 | 0 | 1;
}

/** What the broker answered for one partition of a produce request. */
export interface ProduceResult {
  readonly topic: string;
  readonly partition: number;
  /** The offset of the request's first record in this partition (undefined when acks = 0). */
  readonly baseOffset: string | undefined;
}

/** Anything that sends a produce request: a producer, or an open transaction. */
export interface RecordSender {
  send(request: ProduceRequest): Promise<ProduceResult[]>;
  /**
   * True when its requests join a transaction: one that failed is never sent again, since the broker may have
   * written it and a second copy would commit beside it. The transaction is aborted instead.
   */
  readonly transactional?: boolean;
}
