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
  // The reader hands over Buffers; a view is made only for other byte arrays (restores call this per record).
  const buffer = Buffer.isBuffer(value)
    ? value
    : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  const expiresAt = buffer.readDoubleBE(1);
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
  if (value[0] === V3) {
    const view = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    return { expiresAt, firstSeenAt: view.readDoubleBE(9) };
  }
  const text = Buffer.from(value.buffer, value.byteOffset + 9, value.byteLength - 9).toString('utf8');
  const { id: _id, ...record } = decodeRecord('', text);
  return record;
}

/** The repository record that a changelog entry stands for: key plus mark (a bare mark is a confirmed record). */
export function markRecord(key: string, mark: ChangelogMark): IdempotencyRecord {
  return { state: 'confirmed', ...mark, id: key };
}

function unreadable(value: Uint8Array): InvalidInputError {
  return new InvalidInputError(
    'changelog value',
    value.length === 0
      ? 'empty value (a deleted id is a null value, not an empty one)'
      : `unknown mark format ${value[0]} (${value.length} bytes); written by a newer version?`,
  );
}
