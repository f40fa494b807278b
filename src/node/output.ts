import {
  type KafkaErrorClassifier,
  type OutgoingMessage,
  type RecordSender,
  retrying,
} from '../kafka/port/index.js';

/** A record the output topic refused for what it is (too large, invalid), so sending it again cannot help. */
export interface Refused {
  /** Its position in the list given to {@link OutputWriter.write}. */
  readonly index: number;
  readonly error: unknown;
  /** Requests that carried it. */
  readonly attempts: number;
}

export interface OutputWriterOptions {
  readonly topic: string;
  /** The topic's `max.message.bytes`; requests are cut below it so a normal batch is never refused whole. */
  readonly maxBatchBytes: number;
  /**
   * `maxBatchBytes` was read from the topic: through a transactional sender a record over it is refused here, never
   * sent, since a request refused inside a transaction leaves @platformatic/kafka's sequence number for the
   * partition ahead and every later request fails (OUT_OF_ORDER_SEQUENCE_NUMBER).
   */
  readonly refuseOverLimit?: boolean;
  /**
   * Tries of one request that fails with a passing error (broker away) before the error is raised; one through a
   * transactional sender, whose failed request may have been written (the chunk's transaction aborts instead).
   */
  readonly sendAttempts: number;
  readonly retryBackoffMs: number;
  /** The client's error classes: a request refused for its records is split, a fenced one never retried. */
  readonly errors: KafkaErrorClassifier;
  /** Told about each failed try that will be retried. */
  readonly onRetry?: (error: unknown, attempt: number) => void;
}

/**
 * Most records per request: kafkajs's producer copies a partition's list at every message, quadratic in the
 * request's size, so past about a thousand records a larger request costs more than the round trip it saves.
 */
const MAX_RECORDS_PER_REQUEST = 1_000;

/** Bytes a record adds to a batch beyond its key, value and headers (length varints, deltas, attributes). */
const RECORD_OVERHEAD = 24;
/** The record batch header. */
const BATCH_OVERHEAD = 61;

/**
 * Writes records to one partition of a topic, in order, acks from all in-sync replicas. A passing error is retried
 * a bounded number of times, then raised (a broker outage dead-letters nothing). A request refused for its records
 * is split in halves until each refused record stands alone: those are returned, the rest written in order.
 */
export class OutputWriter {
  readonly #producer: RecordSender;
  readonly #options: OutputWriterOptions;
  readonly #budget: number;

  constructor(producer: RecordSender, options: OutputWriterOptions) {
    this.#producer = producer;
    this.#options = options;
    // 10% headroom: the estimate below does not count every varint byte.
    this.#budget = Math.max(1, Math.floor(options.maxBatchBytes * 0.9) - BATCH_OVERHEAD);
  }

  /** Writes `messages` to `partition` in order through `sender`; resolves with the records the topic refused. */
  async write(
    partition: number,
    messages: readonly OutgoingMessage[],
    sender: RecordSender = this.#producer,
  ): Promise<Refused[]> {
    const refused: Refused[] = [];
    // Sends messages[from, to) as one request; one refused for its records is split in halves (`attempt` + 1).
    const sendOrSplit = async (from: number, to: number, attempt = 1): Promise<void> => {
      try {
        const batch = from === 0 && to === messages.length ? messages : messages.slice(from, to);
        await this.#send(sender, partition, batch);
      } catch (error) {
        if (this.#options.errors.recordErrorType(error) === undefined) throw error;
        if (to - from === 1) {
          refused.push({ index: from, error, attempts: attempt });
          return;
        }
        const mid = from + ((to - from) >>> 1);
        await sendOrSplit(from, mid, attempt + 1);
        await sendOrSplit(mid, to, attempt + 1);
      }
    };
    let start = 0;
    let bytes = 0;
    for (let i = 0; i < messages.length; i++) {
      const size = approxBytes(messages[i] as OutgoingMessage);
      if (sender.transactional === true && size > this.#budget && this.#overLimit(size)) {
        if (i > start) await sendOrSplit(start, i);
        refused.push({
          index: i,
          error: new RecordTooLargeError(this.#options.topic, this.#options.maxBatchBytes),
          attempts: 0,
        });
        start = i + 1;
        bytes = 0;
        continue;
      }
      if (i > start && (bytes + size > this.#budget || i - start >= MAX_RECORDS_PER_REQUEST)) {
        await sendOrSplit(start, i);
        start = i;
        bytes = 0;
      }
      bytes += size;
    }
    if (start < messages.length) await sendOrSplit(start, messages.length);
    return refused;
  }

  /**
   * True when even the smallest encoding of a record of `approxBytes` size, alone in a batch, is over the limit:
   * the batch header, and 7 fixed fields at one byte each (length, attributes, timestamp and offset deltas, key and
   * value lengths, header count) instead of {@link RECORD_OVERHEAD}.
   */
  #overLimit(size: number): boolean {
    return (
      this.#options.refuseOverLimit === true &&
      size - RECORD_OVERHEAD + BATCH_OVERHEAD + 7 > this.#options.maxBatchBytes
    );
  }

  async #send(sender: RecordSender, partition: number, messages: readonly OutgoingMessage[]): Promise<void> {
    const { topic, retryBackoffMs, onRetry, errors } = this.#options;
    const sendAttempts = sender.transactional ? 1 : this.#options.sendAttempts;
    const batch = messages.map((m) => (m.partition === partition ? m : { ...m, partition }));
    await retrying(
      () => sender.send({ topic, acks: -1, messages: batch }),
      (error, attempt) => {
        // A fenced producer stays fenced: retrying would only delay handing the partition over.
        if (errors.recordErrorType(error) !== undefined || errors.isFenced(error) || attempt >= sendAttempts)
          return undefined;
        onRetry?.(error, attempt);
        return retryBackoffMs * 2 ** (attempt - 1);
      },
    );
  }
}

/**
 * What the broker answers for a record over the topic's `max.message.bytes` (MESSAGE_TOO_LARGE), raised without
 * a request: the clients' classifiers read the broker error name from `apiId` (platformatic) or `type` (kafkajs).
 */
class RecordTooLargeError extends Error {
  readonly apiId = 'MESSAGE_TOO_LARGE';
  readonly type = 'MESSAGE_TOO_LARGE';
  constructor(topic: string, maxBytes: number) {
    super(
      `The record is larger than the max message size of ${topic} (max.message.bytes ${maxBytes}): not sent, so the transaction stays usable`,
    );
    this.name = 'RecordTooLargeError';
  }
}

/** A record's bytes in a batch, roughly: names count UTF-16 units (<= UTF-8 bytes), so less RECORD_OVERHEAD, a lower bound. */
function approxBytes(message: OutgoingMessage): number {
  let size = RECORD_OVERHEAD + byteLength(message.key) + byteLength(message.value);
  const headers = message.headers;
  if (headers) {
    for (const name in headers) {
      const value = headers[name];
      if (Array.isArray(value)) for (const v of value) size += name.length + 2 + byteLength(v);
      else size += name.length + 2 + byteLength(value);
    }
  }
  return size;
}

function byteLength(value: Buffer | string | null | undefined): number {
  if (value === null || value === undefined) return 0;
  return typeof value === 'string' ? Buffer.byteLength(value) : value.length;
}
