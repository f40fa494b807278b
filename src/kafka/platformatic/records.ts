import type { MessageToProduce, RecordsBatch } from '@platformatic/kafka';
import type { ConsumedMessage, MessageHeaders, OutgoingMessage, RecordBatch } from '../port/index.js';

// The port's records as the library's and back: once per record on the hot path, so plain loops.

/** The attributes bit of a control batch (transaction markers). */
export const CONTROL_BATCH = 0x20;
export const TRANSACTIONAL_BATCH = 0x10;

/** Header pairs as the port's header object: a name seen twice becomes an array, as kafkajs does. */
function headersObject(pairs: readonly (readonly [Buffer | null, Buffer | null])[]): MessageHeaders {
  const headers: MessageHeaders = {};
  for (const [name, value] of pairs) {
    if (name === null) continue;
    const key = name.toString();
    const previous = headers[key];
    const v = value ?? Buffer.alloc(0);
    if (previous === undefined) headers[key] = v;
    else if (Array.isArray(previous)) previous.push(v);
    else headers[key] = [previous, v];
  }
  return headers;
}

/** The records of `batches` from `from` on, control batches left out, in offset order. */
export function consumedMessages(batches: readonly RecordsBatch[], from: bigint): ConsumedMessage[] {
  const messages: ConsumedMessage[] = [];
  for (const batch of batches) {
    if ((batch.attributes & CONTROL_BATCH) !== 0) continue;
    for (const record of batch.records) {
      const offset = batch.firstOffset + BigInt(record.offsetDelta);
      // A fetch returns whole batches: records before the asked offset were read already.
      if (offset < from) continue;
      messages.push({
        key: record.key,
        value: record.value,
        headers: headersObject(record.headers),
        timestamp: String(batch.firstTimestamp + record.timestampDelta),
        offset: String(offset),
        attributes: batch.attributes,
      });
    }
  }
  return messages;
}

function bytes(value: Buffer | string): Buffer {
  return typeof value === 'string' ? Buffer.from(value) : value;
}

/** The port's header object as header pairs (arrays become repeated names). */
function headerMap(headers: MessageHeaders): Map<Buffer, Buffer> {
  const map = new Map<Buffer, Buffer>();
  for (const name of Object.keys(headers)) {
    const value = headers[name];
    if (value === undefined) continue;
    // A Map keyed by distinct Buffer objects keeps repeated names apart.
    for (const v of Array.isArray(value) ? value : [value]) map.set(Buffer.from(name), bytes(v));
  }
  return map;
}

/** One outgoing record of the port as the library's record for `topic`. */
export function toProduce(topic: string, message: OutgoingMessage): MessageToProduce {
  const record: MessageToProduce = { topic };
  if (message.key !== undefined && message.key !== null) record.key = bytes(message.key);
  if (message.value !== null) record.value = bytes(message.value);
  if (message.partition !== undefined) record.partition = message.partition;
  if (message.headers !== undefined) record.headers = headerMap(message.headers);
  if (message.timestamp !== undefined) record.timestamp = BigInt(message.timestamp);
  return record;
}

/** A library batch as the partition reader's (its headers keep a repeated name's last value). */
export function recordBatch(b: RecordsBatch): RecordBatch {
  const base = Number(b.firstOffset);
  return {
    baseOffset: base,
    lastOffsetDelta: b.lastOffsetDelta,
    producerId: Number(b.producerId),
    inTransaction: (b.attributes & TRANSACTIONAL_BATCH) !== 0,
    isControl: (b.attributes & CONTROL_BATCH) !== 0,
    records: b.records.map((r) => {
      const headers: Record<string, Buffer> = {};
      for (const [name, value] of r.headers)
        if (name !== null) headers[name.toString()] = value ?? Buffer.alloc(0);
      return {
        offset: base + r.offsetDelta,
        key: r.key === null ? null : r.key.toString(),
        value: r.value,
        headers,
      };
    }),
  };
}
