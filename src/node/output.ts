import type { Message, Producer, ProducerRecord, RecordMetadata } from 'kafkajs';

/** A record the output topic refused for what it is (too large, invalid), so sending it again cannot help. */
export interface Refused {
  /** Its position in the list given to {@link OutputWriter.write}. */
  readonly index: number;
  readonly error: unknown;
  /** Requests that carried it. */
  readonly attempts: number;
}

/** What output requests go through: the producer, or (exactly-once) the chunk's open transaction. */
export interface RecordSender {
  send(record: ProducerRecord): Promise<RecordMetadata[]>;
}

/** Options of {@link OutputWriter}. */
export interface OutputWriterOptions {
  readonly topic: string;
  /** The topic's `max.message.bytes`; requests are cut below it so a normal batch is never refused whole. */
  readonly maxBatchBytes: number;
  /** Tries of one request that fails with a passing error (broker away) before the error is raised. */
  readonly sendAttempts: number;
  readonly retryBackoffMs: number;
  /** Told about each failed try that will be retried. */
  readonly onRetry?: (error: unknown, attempt: number) => void;
}

/**
 * Broker error types that condemn the records of the request rather than the request: no retry can pass them,
 * so the writer splits the request to find the records at fault.
 */
const RECORD_ERRORS = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'INVALID_TIMESTAMP',
]);

/**
 * Most records per request. kafkajs's producer groups a request's messages per partition by copying the
 * partition's list at every message (`[...current, message]`), a cost quadratic in the request's size: past about
 * a thousand records a larger request costs more than the round trip it saves (profiled with chunks of 10,000
 * during catch-up, docs/node.md "Fast catch-up").
 */
export const MAX_RECORDS_PER_REQUEST = 1_000;

/** Bytes a record adds to a batch beyond its key, value and headers (length varints, deltas, attributes). */
const RECORD_OVERHEAD = 24;
/** The record batch header. */
const BATCH_OVERHEAD = 61;

/**
 * Writes records to one partition of the output topic, in order, each request acknowledged by all in-sync
 * replicas. A request that fails with an error that may pass is retried a bounded number of times and then
 * raised (nothing is dead-lettered for a broker outage). A request refused for its records is split in halves,
 * recursively, until each refused record stands alone: those are returned, every other record is written, and
 * the survivors keep their relative order.
 */
export class OutputWriter {
  readonly #producer: Producer;
  readonly #options: OutputWriterOptions;
  readonly #budget: number;

  constructor(producer: Producer, options: OutputWriterOptions) {
    this.#producer = producer;
    this.#options = options;
    // 10% headroom: the estimate below does not count every varint byte.
    this.#budget = Math.max(1, Math.floor(options.maxBatchBytes * 0.9) - BATCH_OVERHEAD);
  }

  /**
   * Writes `messages` to `partition` in order; resolves with the records the topic refused (usually none).
   * `sender` is the producer unless given (exactly-once passes the chunk's transaction).
   */
  async write(
    partition: number,
    messages: readonly Message[],
    sender: RecordSender = this.#producer,
  ): Promise<Refused[]> {
    const refused: Refused[] = [];
    let start = 0;
    let bytes = 0;
    for (let i = 0; i < messages.length; i++) {
      const size = approxBytes(messages[i] as Message);
      if (i > start && (bytes + size > this.#budget || i - start >= MAX_RECORDS_PER_REQUEST)) {
        await this.#sendOrSplit(sender, partition, messages, start, i, 1, refused);
        start = i;
        bytes = 0;
      }
      bytes += size;
    }
    if (start < messages.length) {
      await this.#sendOrSplit(sender, partition, messages, start, messages.length, 1, refused);
    }
    return refused;
  }

  async #sendOrSplit(
    sender: RecordSender,
    partition: number,
    messages: readonly Message[],
    from: number,
    to: number,
    attempt: number,
    refused: Refused[],
  ): Promise<void> {
    try {
      await this.#send(
        sender,
        partition,
        from === 0 && to === messages.length ? messages : messages.slice(from, to),
      );
    } catch (error) {
      if (recordErrorType(error) === undefined) throw error;
      if (to - from === 1) {
        refused.push({ index: from, error, attempts: attempt });
        return;
      }
      const mid = from + ((to - from) >>> 1);
      await this.#sendOrSplit(sender, partition, messages, from, mid, attempt + 1, refused);
      await this.#sendOrSplit(sender, partition, messages, mid, to, attempt + 1, refused);
    }
  }

  async #send(sender: RecordSender, partition: number, messages: readonly Message[]): Promise<void> {
    const { topic, sendAttempts, retryBackoffMs, onRetry } = this.#options;
    const batch = messages.map((m) => (m.partition === partition ? m : { ...m, partition }));
    for (let attempt = 1; ; attempt++) {
      try {
        await sender.send({ topic, acks: -1, messages: batch });
        return;
      } catch (error) {
        // A fenced producer stays fenced: retrying would only delay handing the partition over.
        if (recordErrorType(error) !== undefined || isFenced(error) || attempt >= sendAttempts) throw error;
        onRetry?.(error, attempt);
        await sleep(retryBackoffMs * 2 ** (attempt - 1));
      }
    }
  }
}

/**
 * Broker error types telling a transactional producer that a newer one with its transactional id exists (the
 * partition's new owner): its transaction can never commit.
 */
const FENCED_ERRORS = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED']);

/** True when `error` (or a cause it wraps) says this transactional producer was fenced by a newer one. */
export function isFenced(error: unknown): boolean {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && FENCED_ERRORS.has(type)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** The broker error type that condemns the records (e.g. `MESSAGE_TOO_LARGE`), looking through wrapped causes. */
export function recordErrorType(error: unknown): string | undefined {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && RECORD_ERRORS.has(type)) return type;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function approxBytes(message: Message): number {
  let size = RECORD_OVERHEAD + byteLength(message.key) + byteLength(message.value);
  const headers = message.headers;
  if (headers) {
    for (const name in headers) {
      const value = headers[name];
      size += name.length + 2;
      if (Array.isArray(value)) for (const v of value) size += byteLength(v) + name.length + 2;
      else size += byteLength(value);
    }
  }
  return size;
}

function byteLength(value: Buffer | string | null | undefined): number {
  if (value === null || value === undefined) return 0;
  return typeof value === 'string' ? Buffer.byteLength(value) : value.length;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
