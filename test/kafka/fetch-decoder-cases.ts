/*
 * The fetch decoder's cases, run in a child process with a small heap by fetch-decoder.test.ts: a decoder that
 * trusts a length or a count loops or allocates without end, and the child dies of it (out of memory, or killed at
 * the time limit) instead of taking the test runner down with it. Prints one line per case: `start <name>`, then
 * `ok <name>` or `fail <name>: <reason>`. `node --import tsx test/kafka/fetch-decoder-cases.ts [name...]`.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decodeFetchV11, FetchDecodeError } from '../../src/kafka/changelog/fetch-decoder.js';
import type { BatchRecord } from '../../src/kafka/port/index.js';

/** Fixed, so a failure replays; fast-check prints the path of a shrunk counterexample. */
const SEED = 0x17_fe7c;
const RUNS = 300;

// ---- an encoder of Fetch v11 response bodies (after the correlation id) --------------------------------------

interface Rec {
  offsetDelta: number;
  key: string | null;
  value: Buffer | null;
  headers: [string, Buffer | null][];
}
interface Batch {
  baseOffset: number;
  producerId: number;
  attributes: number;
  records: Rec[];
}
interface Part {
  partition: number;
  aborted: { producerId: number; firstOffset: number }[] | null;
  batches: Batch[];
}

class Writer {
  readonly parts: Buffer[] = [];
  int8(v: number): this {
    const b = Buffer.alloc(1);
    b.writeInt8(v);
    return this.push(b);
  }
  int16(v: number): this {
    const b = Buffer.alloc(2);
    b.writeInt16BE(v);
    return this.push(b);
  }
  int32(v: number): this {
    const b = Buffer.alloc(4);
    b.writeInt32BE(v);
    return this.push(b);
  }
  int64(v: number): this {
    const b = Buffer.alloc(8);
    b.writeBigInt64BE(BigInt(v));
    return this.push(b);
  }
  varint(v: number): this {
    let z = ((v << 1) ^ (v >> 31)) >>> 0;
    const out: number[] = [];
    while (z > 0x7f) {
      out.push((z & 0x7f) | 0x80);
      z >>>= 7;
    }
    out.push(z);
    return this.push(Buffer.from(out));
  }
  bytes(b: Buffer | null): this {
    if (b === null) return this.varint(-1);
    return this.varint(b.length).push(b);
  }
  push(b: Buffer): this {
    this.parts.push(b);
    return this;
  }
  done(): Buffer {
    return Buffer.concat(this.parts);
  }
}

function encodeRecord(r: Rec): Buffer {
  const body = new Writer().int8(0).varint(0).varint(r.offsetDelta);
  body
    .bytes(r.key === null ? null : Buffer.from(r.key, 'utf8'))
    .bytes(r.value)
    .varint(r.headers.length);
  for (const [name, value] of r.headers) body.bytes(Buffer.from(name, 'utf8')).bytes(value);
  const bytes = body.done();
  return new Writer().varint(bytes.length).push(bytes).done();
}

function encodeBatch(
  b: Batch,
  overrides: { count?: number; length?: number; records?: Buffer } = {},
): Buffer {
  const records = overrides.records ?? Buffer.concat(b.records.map(encodeRecord));
  const header = new Writer()
    .int32(0) // leader epoch
    .int8(2) // magic
    .int32(0) // crc
    .int16(b.attributes)
    .int32(Math.max(0, b.records.length - 1))
    .int64(0)
    .int64(0)
    .int64(b.producerId)
    .int16(0)
    .int32(0)
    .int32(overrides.count ?? b.records.length)
    .done();
  const length = overrides.length ?? header.length + records.length;
  return new Writer().int64(b.baseOffset).int32(length).push(header).push(records).done();
}

function encodeResponse(parts: Part[], recordSets?: Buffer[]): Buffer {
  const w = new Writer()
    .int32(0)
    .int16(0)
    .int32(0)
    .int32(1)
    .int16(5)
    .push(Buffer.from('topic'))
    .int32(parts.length);
  parts.forEach((p, i) => {
    w.int32(p.partition).int16(0).int64(100).int64(100).int64(0);
    if (p.aborted === null) w.int32(-1);
    else {
      w.int32(p.aborted.length);
      for (const a of p.aborted) w.int64(a.producerId).int64(a.firstOffset);
    }
    w.int32(-1);
    const records = recordSets?.[i] ?? Buffer.concat(p.batches.map((b) => encodeBatch(b)));
    w.int32(records.length).push(records);
  });
  return w.done();
}

/** A response around one partition whose record set is `records` (a batch or bytes of a test's making). */
function responseWith(records: Buffer): Buffer {
  return encodeResponse([{ partition: 0, aborted: [], batches: [] }], [records]);
}

// ---- generators -------------------------------------------------------------------------------------------

const bytes = fc.uint8Array({ maxLength: 40 }).map((a) => Buffer.from(a));
const rec: fc.Arbitrary<Rec> = fc.record({
  offsetDelta: fc.nat({ max: 1000 }),
  key: fc.option(fc.string({ maxLength: 20 }), { nil: null }),
  value: fc.option(bytes, { nil: null }),
  headers: fc.array(fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), fc.option(bytes, { nil: null })), {
    maxLength: 3,
  }),
});
const batch: fc.Arbitrary<Batch> = fc.record({
  baseOffset: fc.nat({ max: 2 ** 40 }),
  producerId: fc.integer({ min: -1, max: 2 ** 40 }),
  attributes: fc.constantFrom(0, 0x10, 0x30),
  records: fc.array(rec, { maxLength: 6 }),
});
const part: fc.Arbitrary<Part> = fc.record({
  partition: fc.nat({ max: 50 }),
  aborted: fc.option(fc.array(fc.record({ producerId: fc.nat(), firstOffset: fc.nat() }), { maxLength: 3 }), {
    nil: null,
  }),
  batches: fc.array(batch, { maxLength: 4 }),
});
const response = fc.array(part, { minLength: 1, maxLength: 3 });

// ---- checks -------------------------------------------------------------------------------------------------

function expectedRecords(b: Batch): BatchRecord[] {
  return b.records.map((r) => {
    const headers: Record<string, Buffer> = {};
    for (const [name, value] of r.headers) if (value !== null) headers[name] = value;
    return { offset: b.baseOffset + r.offsetDelta, key: r.key, value: r.value, headers };
  });
}

function sameBatches(decoded: ReturnType<typeof decodeFetchV11>, parts: Part[], label: string): void {
  assert.ok(decoded !== undefined, `${label}: decoded`);
  assert.equal(decoded.length, parts.length, `${label}: partitions`);
  decoded.forEach((d, i) => {
    const p = parts[i] as Part;
    assert.equal(d.partition, p.partition);
    assert.deepEqual(
      d.abortedTransactions,
      (p.aborted ?? []).map((a) => ({ ...a })),
    );
    assert.equal(d.batches.length, p.batches.length, `${label}: batches of partition ${i}`);
    d.batches.forEach((db, j) => {
      const b = p.batches[j] as Batch;
      assert.equal(db.baseOffset, b.baseOffset);
      assert.equal(db.producerId, b.producerId);
      assert.equal(db.inTransaction, (b.attributes & 0x10) !== 0);
      assert.equal(db.isControl, (b.attributes & 0x20) !== 0);
      assert.deepEqual(
        db.records.map((r) => ({ ...r, headers: { ...r.headers } })),
        expectedRecords(b),
      );
    });
  });
}

/** Decodes `body`: an answer, undefined (left to kafkajs) or a FetchDecodeError, never another error. */
function decodeOrTypedError(body: Buffer): ReturnType<typeof decodeFetchV11> | FetchDecodeError {
  try {
    return decodeFetchV11(body);
  } catch (error) {
    if (error instanceof FetchDecodeError) {
      assert.ok(error.position >= 0 && error.position <= body.length, `position ${error.position}`);
      return error;
    }
    throw error;
  }
}

function decodeError(body: Buffer, pattern: RegExp): void {
  assert.throws(
    () => decodeFetchV11(body),
    (error: unknown) => error instanceof FetchDecodeError && pattern.test(error.message),
  );
}

const one: Batch = {
  baseOffset: 10,
  producerId: 7,
  attributes: 0,
  records: [{ offsetDelta: 0, key: 'k', value: Buffer.from('v'), headers: [] }],
};

const cases: Record<string, () => void> = {
  'valid responses decode to what was encoded'() {
    fc.assert(
      fc.property(response, (parts) => sameBatches(decodeFetchV11(encodeResponse(parts)), parts, 'whole')),
      { seed: SEED, numRuns: RUNS },
    );
  },

  'a record set cut by the byte limit yields the complete batches before the cut'() {
    fc.assert(
      fc.property(fc.array(batch, { minLength: 1, maxLength: 4 }), fc.nat(), (batches, at) => {
        const encoded = batches.map((b) => encodeBatch(b));
        const all = Buffer.concat(encoded);
        const cut = at % (all.length + 1);
        let whole = 0;
        for (let used = 0; whole < encoded.length; whole++) {
          used += (encoded[whole] as Buffer).length;
          if (used > cut) break;
        }
        const parts: Part[] = [{ partition: 0, aborted: [], batches: batches.slice(0, whole) }];
        sameBatches(decodeFetchV11(responseWith(all.subarray(0, cut))), parts, `cut at ${cut}`);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  },

  'a truncated response raises a FetchDecodeError'() {
    fc.assert(
      fc.property(response, fc.nat(), (parts, at) => {
        const body = encodeResponse(parts);
        const cut = at % body.length;
        assert.ok(decodeOrTypedError(body.subarray(0, cut)) instanceof FetchDecodeError, `cut at ${cut}`);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  },

  'random bytes after a valid header decode or raise a FetchDecodeError'() {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), (random) => {
        decodeOrTypedError(responseWith(Buffer.from(random)));
      }),
      { seed: SEED, numRuns: RUNS * 3 },
    );
  },

  'a valid response with bytes overwritten decodes or raises a FetchDecodeError'() {
    fc.assert(
      fc.property(
        response,
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 8 }),
        (parts, edits) => {
          const body = Buffer.from(encodeResponse(parts));
          for (const [at, value] of edits) body[at % body.length] = value;
          decodeOrTypedError(body);
        },
      ),
      { seed: SEED, numRuns: RUNS * 3 },
    );
  },

  'a negative record length'() {
    const record = encodeRecord(one.records[0] as Rec);
    const negative = Buffer.concat([new Writer().varint(-20).done(), record.subarray(1)]);
    decodeError(responseWith(encodeBatch(one, { records: negative })), /negative|record length -20/);
    // The same with a count the bytes cannot hold: today's decoder walked backwards through the buffer forever.
    decodeError(responseWith(encodeBatch(one, { records: negative, count: 2 ** 31 - 1 })), /record count/);
  },

  'an absurd record count'() {
    decodeError(responseWith(encodeBatch(one, { count: 2 ** 31 - 1 })), /record count 2147483647/);
    decodeError(responseWith(encodeBatch(one, { count: -1 })), /negative record count/);
    // Records of length 0 (no bytes to advance by) under a large count.
    decodeError(
      responseWith(encodeBatch(one, { records: Buffer.alloc(64), count: 50_000_000 })),
      /record count 50000000/,
    );
  },

  'a negative or short batch length'() {
    decodeError(responseWith(encodeBatch(one, { length: -100 })), /batch length -100/);
    decodeError(responseWith(encodeBatch(one, { length: 3 })), /batch length 3/);
  },

  'absurd header, aborted-transaction, partition and topic counts'() {
    const withHeaders = encodeRecord({ offsetDelta: 0, key: 'k', value: null, headers: [] });
    const lots = Buffer.concat([
      withHeaders.subarray(0, withHeaders.length - 1),
      new Writer().varint(1e9).done(),
    ]);
    const fixed = Buffer.concat([new Writer().varint(lots.length - 1).done(), lots.subarray(1)]);
    decodeError(responseWith(encodeBatch(one, { records: fixed })), /header count 1000000000/);

    const aborted = Buffer.from(encodeResponse([{ partition: 0, aborted: [], batches: [] }]));
    aborted.writeInt32BE(2 ** 31 - 1, 4 + 2 + 4 + 4 + 2 + 5 + 4 + 4 + 2 + 24);
    decodeError(aborted, /aborted transaction count/);

    const partitions = Buffer.from(encodeResponse([{ partition: 0, aborted: [], batches: [] }]));
    partitions.writeInt32BE(2 ** 31 - 1, 4 + 2 + 4 + 4 + 2 + 5);
    decodeError(partitions, /partition count/);

    const topics = Buffer.from(encodeResponse([{ partition: 0, aborted: [], batches: [] }]));
    topics.writeInt32BE(2 ** 31 - 1, 4 + 2 + 4);
    decodeError(topics, /topic count/);
  },

  'key, value and header lengths past their record'() {
    const r = encodeRecord({ offsetDelta: 0, key: 'key', value: Buffer.from('value'), headers: [] });
    // The record: length, attributes, timestamp delta, offset delta, then the key length at byte 4.
    const key = Buffer.from(r);
    key[4] = 2 * 50; // zigzag 50
    decodeError(responseWith(encodeBatch(one, { records: key })), /key length 50/);
    const value = Buffer.from(r);
    value[4 + 1 + 3] = 2 * 50;
    decodeError(responseWith(encodeBatch(one, { records: value })), /value length 50/);
    const negativeKey = Buffer.from(r);
    negativeKey[4] = 2 * 5 - 1; // zigzag -5
    decodeError(responseWith(encodeBatch(one, { records: negativeKey })), /negative key length -5/);
  },
};

const wanted = process.argv.slice(2);
let failed = 0;
for (const [name, run] of Object.entries(cases)) {
  if (wanted.length > 0 && !wanted.includes(name)) continue;
  console.log(`start ${name}`);
  try {
    run();
    console.log(`ok ${name}`);
  } catch (error) {
    failed++;
    const text = error instanceof Error ? (error.stack ?? error.message) : String(error);
    console.log(`fail ${name}: ${JSON.stringify(text.slice(0, 4000))}`);
  }
}
process.exitCode = failed > 0 ? 1 : 0;
