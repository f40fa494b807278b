import { InvalidIdError } from '../errors.js';
import type { MessageId } from './types.js';

/**
 * Largest canonical key any bundled repository accepts, in UTF-8 bytes. DynamoDB caps a partition key
 * at 2048 bytes; 1024 leaves room for a namespace prefix everywhere.
 */
export const MAX_ID_BYTES = 1024;

/** Binary ids are stored as base64 behind a NUL marker, which a well-formed text id never starts with by accident. */
const BINARY_PREFIX = '\u0000b64:';

/**
 * Turns a message id into the string key every repository stores.
 * Rejects empty ids, ids over `maxBytes`, and strings with lone surrogates (they cannot round-trip through UTF-8,
 * so two different ids could collide).
 */
export function toKey(id: MessageId, maxBytes: number = MAX_ID_BYTES): string {
  let key: string;
  if (typeof id === 'string') {
    if (id.length === 0) throw new InvalidIdError('id is empty');
    if (!id.isWellFormed()) throw new InvalidIdError('id is not well-formed Unicode (lone surrogate)');
    key = id;
  } else if (id instanceof Uint8Array) {
    if (id.byteLength === 0) throw new InvalidIdError('id is empty');
    key = BINARY_PREFIX + Buffer.from(id.buffer, id.byteOffset, id.byteLength).toString('base64');
  } else {
    throw new InvalidIdError(`id must be a string or bytes, got ${typeof id}`);
  }
  // Byte length is only computed when the UTF-16 length could exceed the limit.
  if (key.length * 3 > maxBytes && Buffer.byteLength(key, 'utf8') > maxBytes) {
    throw new InvalidIdError(`id is ${Buffer.byteLength(key, 'utf8')} bytes, the limit is ${maxBytes}`);
  }
  return key;
}
