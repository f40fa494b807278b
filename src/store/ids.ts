import { InvalidIdError } from '../errors.js';
import type { MessageId } from './types.js';

/**
 * Largest canonical key any bundled repository accepts, in UTF-8 bytes. DynamoDB caps a partition key
 * at 2048 bytes; 1024 leaves room for a namespace prefix everywhere.
 */
export const MAX_ID_BYTES = 1024;

/**
 * Keys that start with NUL are reserved: `\0b64:` + base64 is a binary id, and `\0` + the text is a text id that
 * itself starts with NUL. Any other text id is its own key (one character test), so `toKey` is not idempotent
 * on reserved keys.
 */
const MARK = '\u0000';
const BINARY_PREFIX = `${MARK}b64:`;

/** The last text id `toKey` took as its own key, and the limit it was checked against (see `toKey`). */
let lastKey: string | undefined;
let lastMaxBytes = 0;

/**
 * Turns a message id into the string key every repository stores; two different ids (text or bytes) never
 * share a key. Rejects empty ids, ids over `maxBytes`, and strings with lone surrogates (no UTF-8 round trip).
 */
export function toKey(id: MessageId, maxBytes: number = MAX_ID_BYTES): string {
  // The id accepted last, under a limit no larger: a consumer hands each id on two or three times.
  if (id === lastKey && maxBytes >= lastMaxBytes) return id;
  let key: string;
  if (typeof id === 'string') {
    if (id.length === 0) throw new InvalidIdError('id is empty');
    if (!id.isWellFormed()) throw new InvalidIdError('id is not well-formed Unicode (lone surrogate)');
    key = id.charCodeAt(0) === 0 ? MARK + id : id;
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
  if (key === id) {
    lastKey = key;
    lastMaxBytes = maxBytes;
  }
  return key;
}

/**
 * The id whose key is `key`: `toKey(idOfKey(k)) === k` for every key `toKey` made, so code holding keys hands
 * a binary id back to a repository under the same key.
 */
export function idOfKey(key: string): MessageId {
  if (key.charCodeAt(0) !== 0) return key;
  if (key.startsWith(BINARY_PREFIX)) return Buffer.from(key.slice(BINARY_PREFIX.length), 'base64');
  return key.slice(1);
}
