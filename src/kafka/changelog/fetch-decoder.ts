/*
 * A decoder of Fetch v11 responses for the changelog reader. kafkajs's own decoder builds, per record, a decoder
 * object, 64-bit Long arithmetic on decimal strings for the offset and the timestamp, and a headers object; on a
 * restore of a million marks that, and the garbage it leaves, is most of the time. This one reads the record
 * batches straight from the response bytes into what the reader needs. Anything it does not handle (another
 * response version, a compressed batch, an old message format) is left to kafkajs's decoder.
 */

/** One record of a batch: where it is, its key and value bytes (null when absent), its headers. */
export interface BatchRecord {
  readonly offset: number;
  readonly key: string | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, Buffer>;
}

/** One record batch, with what aborted-transaction filtering needs. */
export interface RecordBatch {
  readonly baseOffset: number;
  readonly lastOffsetDelta: number;
  readonly producerId: number;
  readonly inTransaction: boolean;
  readonly isControl: boolean;
  readonly records: BatchRecord[];
}

/** One partition of a fetch response. */
export interface FetchedPartition {
  readonly partition: number;
  readonly errorCode: number;
  readonly abortedTransactions: readonly { readonly producerId: number; readonly firstOffset: number }[];
  readonly batches: RecordBatch[];
}

/** Thrown inside the decoder when it meets something it leaves to kafkajs. */
class Unsupported extends Error {}

const TRANSACTIONAL = 0x10;
const CONTROL = 0x20;
const COMPRESSION = 0x07;

/**
 * The partitions of a Fetch v11 response body (after the correlation id), or undefined when it holds something
 * this decoder leaves to kafkajs.
 */
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

  response(): FetchedPartition[] {
    this.#pos += 4 + 2 + 4; // throttle time, top-level error code (sessions are not used), session id
    const out: FetchedPartition[] = [];
    for (let t = this.int32(); t > 0; t--) {
      const nameLength = this.int16(); // the topic name: the reader fetches one topic per request
      this.#pos += nameLength;
      for (let p = this.int32(); p > 0; p--) out.push(this.partition());
    }
    return out;
  }

  partition(): FetchedPartition {
    const partition = this.int32();
    const errorCode = this.int16();
    this.#pos += 8 + 8 + 8; // high watermark, last stable offset, log start offset
    const abortedTransactions: { producerId: number; firstOffset: number }[] = [];
    for (let a = this.int32(); a > 0; a--) {
      abortedTransactions.push({ producerId: this.int64(), firstOffset: this.int64() });
    }
    this.#pos += 4; // preferred read replica
    const size = this.int32();
    const end = this.#pos + Math.max(0, size);
    const batches: RecordBatch[] = [];
    // The last batch can be cut short by the fetch's byte limit; it comes again in the next fetch.
    while (end - this.#pos >= 61) {
      const baseOffset = this.int64();
      const length = this.int32();
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
    const attributes = this.int16();
    if ((attributes & COMPRESSION) !== 0) throw new Unsupported('compressed batch');
    const lastOffsetDelta = this.int32();
    this.#pos += 8 + 8; // first and max timestamps
    const producerId = this.int64();
    this.#pos += 2 + 4; // producer epoch, base sequence
    const count = this.int32();
    const records: BatchRecord[] = new Array(count);
    for (let i = 0; i < count; i++) {
      const length = this.varint();
      const recordEnd = this.#pos + length;
      if (recordEnd > batchEnd) throw new RangeError('record past the end of its batch');
      this.#pos += 1; // attributes
      this.skipVarint(); // timestamp delta (a varlong)
      const offset = baseOffset + this.varint();
      const keyLength = this.varint();
      const key = keyLength < 0 ? null : this.buf.toString('utf8', this.#pos, this.#pos + keyLength);
      if (keyLength > 0) this.#pos += keyLength;
      const valueLength = this.varint();
      const value = valueLength < 0 ? null : this.buf.subarray(this.#pos, this.#pos + valueLength);
      if (valueLength > 0) this.#pos += valueLength;
      let headers: Record<string, Buffer> = NO_HEADERS;
      const headerCount = this.varint();
      if (headerCount > 0) {
        headers = {};
        for (let h = 0; h < headerCount; h++) {
          const nameLength = this.varint();
          const name = this.buf.toString('utf8', this.#pos, this.#pos + nameLength);
          this.#pos += nameLength;
          const headerLength = this.varint();
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

  int16(): number {
    const value = this.buf.readInt16BE(this.#pos);
    this.#pos += 2;
    return value;
  }

  int32(): number {
    const value = this.buf.readInt32BE(this.#pos);
    this.#pos += 4;
    return value;
  }

  /** An int64 as a Number: exact for offsets and producer ids (below 2^53), and for -1. */
  int64(): number {
    const value = this.buf.readInt32BE(this.#pos) * 4_294_967_296 + this.buf.readUInt32BE(this.#pos + 4);
    this.#pos += 8;
    return value;
  }

  /** A zigzag varint (32-bit). */
  varint(): number {
    let raw = 0;
    let shift = 0;
    let byte: number;
    do {
      byte = this.buf[this.#pos++] as number;
      raw |= (byte & 0x7f) << shift;
      shift += 7;
    } while (byte & 0x80 && shift < 35);
    return (raw >>> 1) ^ -(raw & 1);
  }

  skipVarint(): void {
    while ((this.buf[this.#pos++] as number) & 0x80) {}
  }
}

const NO_HEADERS: Record<string, Buffer> = Object.freeze({}) as Record<string, Buffer>;
