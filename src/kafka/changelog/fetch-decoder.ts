/*
 * A Fetch v11 decoder for the kafkajs changelog reader: kafkajs's own builds, per record, a decoder object, Long
 * arithmetic on decimal strings and a headers object, most of a restore's time. This one reads the batches
 * straight from the bytes; what it does not handle (another version, compression, an old format) is kafkajs's.
 */

import { RepositoryError } from '../../errors.js';
import type { BatchRecord, FetchedPartition, RecordBatch } from '../port/index.js';

/** Thrown inside the decoder when it meets something it leaves to kafkajs. */
class Unsupported extends Error {}

/**
 * A Fetch response whose bytes do not hold what its lengths and counts say (trusting a record count of 2^31 ran
 * the process out of memory). `position` is the byte of the response body where the bad field starts.
 */
export class FetchDecodeError extends RepositoryError {
  constructor(
    readonly what: string,
    readonly position: number,
    readonly size: number,
  ) {
    super(`malformed Fetch v11 response: ${what} at byte ${position} of ${size}`, { retryable: false });
  }
}

const TRANSACTIONAL = 0x10;
const CONTROL = 0x20;
const COMPRESSION = 0x07;

/** The bytes of a v2 batch header after baseOffset and batchLength (epoch .. record count). */
const BATCH_HEADER_REST = 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4;
/** The smallest record: length, attributes, timestamp delta, offset delta, key length, value length, header count. */
const MIN_RECORD = 7;
/** The smallest header: name length and value length. */
const MIN_HEADER = 2;
/** A topic's smallest entry: name length and partition count. */
const MIN_TOPIC = 2 + 4;
/** A partition's smallest entry: its fixed fields, an aborted-transaction count and a records size. */
const MIN_PARTITION = 4 + 2 + 8 + 8 + 8 + 4 + 4 + 4;
const ABORTED_TRANSACTION = 8 + 8;

/** A Fetch v11 body's partitions, every length checked; undefined for what it leaves to kafkajs. */
export function decodeFetchV11(body: Buffer): FetchedPartition[] | undefined {
  try {
    return new Reader(body).response();
  } catch (error) {
    if (error instanceof Unsupported) return undefined;
    throw error;
  }
}

class Reader {
  #pos = 0;
  constructor(readonly buf: Buffer) {}

  fail(what: string, position = this.#pos): never {
    throw new FetchDecodeError(what, position, this.buf.length);
  }

  /**
   * A count of items of at least `minSize` bytes each, or a length of bytes (`minSize` 1), read here by `read`:
   * all before `limit`; -1 (a null) only when `nullable`.
   */
  sized(
    read: (limit: number) => number,
    what: string,
    limit: number,
    minSize: number,
    nullable: boolean,
  ): number {
    const at = this.#pos;
    const value = read.call(this, limit);
    if (value < (nullable ? -1 : 0)) this.fail(`negative ${what} ${value}`, at);
    if (value > (limit - this.#pos) / minSize) {
      this.fail(`${what} ${value} needs more than the ${limit - this.#pos} bytes left`, at);
    }
    return value;
  }

  response(): FetchedPartition[] {
    const size = this.buf.length;
    if (size < 4 + 2 + 4 + 4) this.fail(`response of ${size} bytes`, 0);
    this.#pos += 4 + 2 + 4; // throttle time, top-level error code (sessions are not used), session id
    const out: FetchedPartition[] = [];
    for (let t = this.sized(this.int32, 'topic count', size, MIN_TOPIC, false); t > 0; t--) {
      const nameLength = this.sized(this.int16, 'topic name length', size, 1, false);
      this.#pos += nameLength; // the topic name: the reader fetches one topic per request
      for (let p = this.sized(this.int32, 'partition count', size, MIN_PARTITION, false); p > 0; p--) {
        out.push(this.partition(size));
      }
    }
    return out;
  }

  partition(size: number): FetchedPartition {
    const partition = this.int32(size);
    const errorCode = this.int16(size);
    this.skip(8 + 8 + 8, size); // high watermark, last stable offset, log start offset
    const abortedTransactions: { producerId: number; firstOffset: number }[] = [];
    const aborted = this.sized(this.int32, 'aborted transaction count', size, ABORTED_TRANSACTION, true);
    for (let a = aborted; a > 0; a--) {
      abortedTransactions.push({ producerId: this.int64(size), firstOffset: this.int64(size) });
    }
    this.skip(4, size); // preferred read replica
    const records = this.sized(this.int32, 'records size', size, 1, true);
    const end = this.#pos + Math.max(0, records);
    const batches: RecordBatch[] = [];
    // The last batch can be cut short by the fetch's byte limit; it comes again in the next fetch.
    while (end - this.#pos >= 8 + 4 + BATCH_HEADER_REST) {
      const baseOffset = this.int64(end);
      const at = this.#pos;
      const length = this.int32(end);
      if (length < BATCH_HEADER_REST) this.fail(`batch length ${length} below a batch header`, at);
      const batchEnd = this.#pos + length;
      if (batchEnd > end) break;
      batches.push(this.batch(baseOffset, batchEnd));
      this.#pos = batchEnd;
    }
    this.#pos = end;
    return { partition, errorCode, abortedTransactions, batches };
  }

  batch(baseOffset: number, batchEnd: number): RecordBatch {
    this.#pos += 4; // partition leader epoch
    if (this.buf[this.#pos++] !== 2) throw new Unsupported('message format before v2');
    this.#pos += 4; // crc: the broker checked it on append
    const attributes = this.int16(batchEnd);
    if ((attributes & COMPRESSION) !== 0) throw new Unsupported('compressed batch');
    const lastOffsetDelta = this.int32(batchEnd);
    this.#pos += 8 + 8; // first and max timestamps
    const producerId = this.int64(batchEnd);
    this.#pos += 2 + 4; // producer epoch, base sequence
    const count = this.sized(this.int32, 'record count', batchEnd, MIN_RECORD, false);
    const records: BatchRecord[] = new Array(count);
    for (let i = 0; i < count; i++) {
      const at = this.#pos;
      const length = this.varint(batchEnd);
      if (length < MIN_RECORD - 1) this.fail(`record length ${length}`, at);
      const recordEnd = this.#pos + length;
      if (recordEnd > batchEnd) this.fail(`record length ${length} past the end of its batch`, at);
      this.#pos += 1; // attributes
      this.skipVarint(recordEnd); // timestamp delta (a varlong)
      const offset = baseOffset + this.varint(recordEnd);
      const keyLength = this.sized(this.varint, 'key length', recordEnd, 1, true);
      const key = keyLength < 0 ? null : this.buf.toString('utf8', this.#pos, this.#pos + keyLength);
      if (keyLength > 0) this.#pos += keyLength;
      const valueLength = this.sized(this.varint, 'value length', recordEnd, 1, true);
      const value = valueLength < 0 ? null : this.buf.subarray(this.#pos, this.#pos + valueLength);
      if (valueLength > 0) this.#pos += valueLength;
      let headers: Record<string, Buffer> = NO_HEADERS;
      const headerCount = this.sized(this.varint, 'header count', recordEnd, MIN_HEADER, false);
      if (headerCount > 0) {
        headers = {};
        for (let h = 0; h < headerCount; h++) {
          const nameLength = this.sized(this.varint, 'header name length', recordEnd, 1, false);
          const name = this.buf.toString('utf8', this.#pos, this.#pos + nameLength);
          this.#pos += nameLength;
          const headerLength = this.sized(this.varint, 'header value length', recordEnd, 1, true);
          if (headerLength >= 0) {
            headers[name] = this.buf.subarray(this.#pos, this.#pos + headerLength);
            this.#pos += headerLength;
          }
        }
      }
      records[i] = { offset, key, value, headers };
      this.#pos = recordEnd;
    }
    return {
      baseOffset,
      lastOffsetDelta,
      producerId,
      inTransaction: (attributes & TRANSACTIONAL) !== 0,
      isControl: (attributes & CONTROL) !== 0,
      records,
    };
  }

  skip(bytes: number, limit: number): void {
    if (this.#pos + bytes > limit) this.fail(`${bytes} bytes past the end (${limit - this.#pos} left)`);
    this.#pos += bytes;
  }

  int16(limit: number): number {
    if (this.#pos + 2 > limit) this.fail('int16 past the end');
    const value = this.buf.readInt16BE(this.#pos);
    this.#pos += 2;
    return value;
  }

  int32(limit: number): number {
    if (this.#pos + 4 > limit) this.fail('int32 past the end');
    const value = this.buf.readInt32BE(this.#pos);
    this.#pos += 4;
    return value;
  }

  /** An int64 as a Number: exact for offsets and producer ids (below 2^53), and for -1. */
  int64(limit: number): number {
    if (this.#pos + 8 > limit) this.fail('int64 past the end');
    const value = this.buf.readInt32BE(this.#pos) * 4_294_967_296 + this.buf.readUInt32BE(this.#pos + 4);
    this.#pos += 8;
    return value;
  }

  /** A zigzag varint (32-bit: at most 5 bytes), all of it before `limit`. */
  varint(limit: number): number {
    const start = this.#pos;
    let raw = 0;
    let shift = 0;
    let byte: number;
    do {
      if (this.#pos >= limit) this.fail('varint past the end', start);
      byte = this.buf[this.#pos++] as number;
      raw |= (byte & 0x7f) << shift;
      shift += 7;
    } while (byte & 0x80 && shift < 35);
    if (byte & 0x80) this.fail('varint longer than 5 bytes', start);
    return (raw >>> 1) ^ -(raw & 1);
  }

  /** Skips a zigzag varlong (at most 10 bytes) that ends before `limit`. */
  skipVarint(limit: number): void {
    const start = this.#pos;
    for (let n = 0; n < 10; n++) {
      if (this.#pos >= limit) this.fail('varlong past the end', start);
      if (((this.buf[this.#pos++] as number) & 0x80) === 0) return;
    }
    this.fail('varlong longer than 10 bytes', start);
  }
}

const NO_HEADERS: Record<string, Buffer> = Object.freeze({}) as Record<string, Buffer>;
