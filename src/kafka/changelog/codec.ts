import { randomUUID } from 'node:crypto';
import { InvalidInputError } from '../../errors.js';
import { decodeRecord, encodeRecord } from '../../store/record.js';
import type { IdempotencyRecord } from '../../store/types.js';

/** A changelog value: a bare mark `{ expiresAt }` (a confirmed id), or (the `kafka` repository) a whole record. */
export type ChangelogMark = { readonly expiresAt: number } & Partial<
  Omit<IdempotencyRecord, 'id' | 'expiresAt'>
>;

/** Value format 1: the version byte, then expiresAt as a float64 (exact for epoch ms). 9 bytes in all. */
const V1 = 1;
/** Value format 2: V1's 9 bytes, then the whole record in the text form of `encodeRecord` (UTF-8). */
const V2 = 2;
/** Value format 3: V1's 9 bytes, then firstSeenAt as a float64 (17 bytes, where V2's text would be ~45). */
const V3 = 3;
/**
 * Value format 4, a pack: many changes of one partition in one record, so a chunk's marks cost the producer one
 * record, not one each. The version byte and a uint32 count, then per change a uint32 key length, the key
 * (UTF-8), an int32 value length (-1: a deletion) and the value (V1-V3). Its key is {@link packKey}'s.
 */
const V4 = 4;
/** A pack's bytes before its first change, and each change's besides its key and value. */
const PACK_HEADER = 5;
const PACK_ENTRY = 8;

/**
 * The key of a new pack: NUL, `pack:` and a random UUID. No id's canonical key starts with NUL then `p`, and the
 * key is new, so compaction never drops a pack for a later record (the topic's retention deletes it).
 */
export function packKey(): string {
  return `\u0000pack:${randomUUID()}`;
}

/** One change as a pack holds it: the id's canonical key, and its encoded mark (null: a deletion). */
export interface PackedChange {
  readonly key: string;
  readonly value: Buffer | null;
}

/** The bytes one change adds to a pack: its key's `keyBytes`, its value's and their lengths ({@link encodePack}). */
export function packEntryBytes(keyBytes: number, value: Buffer | null): number {
  return PACK_ENTRY + keyBytes + (value?.length ?? 0);
}

/** Encodes changes (marks made by {@link encodeMark}) as one V4 value of `bytes` bytes ({@link packEntryBytes}). */
export function encodePack(changes: readonly PackedChange[], bytes: number): Buffer {
  const out = Buffer.allocUnsafe(PACK_HEADER + bytes);
  out[0] = V4;
  out.writeUInt32BE(changes.length, 1);
  let at = PACK_HEADER;
  for (const { key, value } of changes) {
    const keyBytes = out.write(key, at + 4, 'utf8');
    out.writeUInt32BE(keyBytes, at);
    at += 4 + keyBytes;
    out.writeInt32BE(value === null ? -1 : value.length, at);
    at += 4;
    if (value !== null) at += value.copy(out, at);
  }
  return out;
}

/** True for a V4 value (a pack of changes, {@link decodePack}). */
export function isPack(value: Uint8Array): boolean {
  return value[0] === V4;
}

/** The changes of a V4 value, in order; an InvalidInputError when its lengths do not fit its bytes. */
export function decodePack(value: Uint8Array): PackedChange[] {
  const buffer = asBuffer(value);
  const size = buffer.length;
  if (size < PACK_HEADER || buffer[0] !== V4) throw unreadable(buffer);
  const count = buffer.readUInt32BE(1);
  if (count > (size - PACK_HEADER) / PACK_ENTRY) throw badPack(`${count} changes`, size);
  const changes: PackedChange[] = new Array(count);
  let at = PACK_HEADER;
  for (let i = 0; i < count; i++) {
    if (at + 4 > size) throw badPack(`change ${i}`, size);
    const keyBytes = buffer.readUInt32BE(at);
    at += 4;
    if (keyBytes === 0 || at + keyBytes + 4 > size)
      throw badPack(`key length ${keyBytes} of change ${i}`, size);
    const key = buffer.toString('utf8', at, at + keyBytes);
    at += keyBytes;
    const valueBytes = buffer.readInt32BE(at);
    at += 4;
    if (valueBytes < -1 || at + Math.max(0, valueBytes) > size) {
      throw badPack(`value length ${valueBytes} of change ${i}`, size);
    }
    changes[i] = { key, value: valueBytes < 0 ? null : buffer.subarray(at, at + valueBytes) };
    at += Math.max(0, valueBytes);
  }
  if (at !== size) throw badPack(`${size - at} bytes after its ${count} changes`, size);
  return changes;
}

/** Encodes a mark: V3 (V1 without a first-seen time) for a bare one, V2 otherwise. A deletion is a null value. */
export function encodeMark(mark: ChangelogMark): Buffer {
  const bare =
    (mark.state === undefined || mark.state === 'confirmed') &&
    mark.leaseExpiresAt === undefined &&
    mark.owner === undefined &&
    mark.eventTime === undefined &&
    mark.fingerprint === undefined &&
    mark.result === undefined;
  if (bare) {
    const value = Buffer.allocUnsafe(mark.firstSeenAt === undefined ? 9 : 17);
    value[0] = mark.firstSeenAt === undefined ? V1 : V3;
    value.writeDoubleBE(mark.expiresAt, 1);
    if (mark.firstSeenAt !== undefined) value.writeDoubleBE(mark.firstSeenAt, 9);
    return value;
  }
  const text = encodeRecord({ state: 'confirmed', ...mark, id: '' });
  const value = Buffer.allocUnsafe(9 + Buffer.byteLength(text, 'utf8'));
  value[0] = V2;
  value.writeDoubleBE(mark.expiresAt, 1);
  value.write(text, 9, 'utf8');
  return value;
}

/** The expiry of an encoded mark (all a restore needs), decoding nothing else; InvalidInputError if unreadable. */
export function decodeMarkExpiry(value: Uint8Array): number {
  if (value.length < (value[0] === V3 ? 17 : 9) || (value[0] !== V1 && value[0] !== V2 && value[0] !== V3)) {
    throw unreadable(value);
  }
  const expiresAt = asBuffer(value).readDoubleBE(1);
  // A mark that never expires (NaN compares false with every time, Infinity is always ahead) is never restored.
  if (!Number.isFinite(expiresAt)) {
    throw new InvalidInputError('changelog value', `expiry ${expiresAt} is not a time`);
  }
  return expiresAt;
}

/** Decodes a changelog value made by {@link encodeMark}; throws an InvalidInputError for an unknown version. */
export function decodeMark(value: Uint8Array): ChangelogMark {
  const expiresAt = decodeMarkExpiry(value);
  if (value[0] === V1) return { expiresAt };
  if (value[0] === V3) return { expiresAt, firstSeenAt: asBuffer(value).readDoubleBE(9) };
  const text = asBuffer(value).toString('utf8', 9);
  const { id: _id, ...record } = decodeRecord('', text);
  return record;
}

/** The repository record that a changelog entry stands for: key plus mark (a bare mark is a confirmed record). */
export function markRecord(key: string, mark: ChangelogMark): IdempotencyRecord {
  return { state: 'confirmed', ...mark, id: key };
}

/** `value` as a Buffer: the reader hands over Buffers; a view is made only for other byte arrays (per record). */
function asBuffer(value: Uint8Array): Buffer {
  return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
}

function badPack(what: string, size: number): InvalidInputError {
  return new InvalidInputError('changelog value', `malformed pack of ${size} bytes: ${what}`);
}

function unreadable(value: Uint8Array): InvalidInputError {
  return new InvalidInputError(
    'changelog value',
    value.length === 0
      ? 'empty value (a deleted id is a null value, not an empty one)'
      : `unknown mark format ${value[0]} (${value.length} bytes); written by a newer version?`,
  );
}
