import { createHash } from 'node:crypto';
import { digest, scalarJson } from '../../consumer/fingerprint.js';

/** What a request's fingerprint covers: method, target (path and query) and body. */
export interface RequestParts {
  readonly method: string;
  readonly target: string;
  readonly body: unknown;
}

/**
 * SHA-256 of the method, the request target and the body (the draft's "request payload" check, widened to the
 * target so a key moved to another resource is caught); a parsed body in canonical JSON, so key order does not
 * matter. The digest is of `method \0 target \0 tag payload`, the tag `n` (no body), `s` (text), `b` (bytes) or
 * `j` (JSON), hashed in one call: the same bytes as earlier versions' part-by-part hashing, so their
 * fingerprints still match.
 */
export function requestFingerprint(parts: RequestParts): string {
  const { method, target, body } = parts;
  if (body instanceof Uint8Array) {
    return createHash('sha256').update(`${method}\0${target}\0b`).update(body).digest('base64url');
  }
  const payload =
    body === undefined || body === null
      ? 'n'
      : typeof body === 'string'
        ? `s${body}`
        : `j${canonicalJson(body)}`;
  return digest(`${method}\0${target}\0${payload}`);
}

/** Thrown inside {@link plainJson} for anything it does not write the way `JSON.stringify` would. */
const NOT_PLAIN = Symbol('not plain JSON');

/** Deeper than this, {@link plainJson} leaves the value to `JSON.stringify` (which reports a cycle). */
const MAX_PLAIN_DEPTH = 200;

/**
 * JSON with object keys sorted at every depth: the text of `JSON.stringify` over a copy with sorted keys (so
 * integer-like keys come first, in numeric order). Anything not plain JSON (`toJSON`, class instances, bigint,
 * a cycle) goes through `JSON.stringify` with a sorting replacer, which gives the same text for plain values.
 */
export function canonicalJson(value: unknown): string {
  // Most bodies are plain JSON whose keys already come in that order: checked without writing any text, they are
  // written by the native JSON.stringify, several times cheaper than plainJson and the very same text.
  if (typeof value === 'object' && value !== null && isOrdered(value, 0)) return JSON.stringify(value);
  try {
    return plainJson(value, 0);
  } catch (error) {
    if (error !== NOT_PLAIN) throw error;
    return sortedStringify(value);
  }
}

function sortedStringify(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || Buffer.isBuffer(v)) return v;
    // Without a prototype: a body member named `__proto__` (JSON.parse keeps it as a member) must stay a
    // member of the copy, not become its prototype, or a changed body would fingerprint alike.
    const sorted: Record<string, unknown> = Object.create(null);
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/** `JSON.stringify`'s text of a value that is plain JSON (top level: never undefined); throws NOT_PLAIN else. */
function plainJson(value: unknown, depth: number): string {
  const scalar = scalarJson(value);
  if (scalar !== undefined) return scalar;
  if (typeof value !== 'object') throw NOT_PLAIN;
  if (value === null) return 'null';
  if (depth > MAX_PLAIN_DEPTH) throw NOT_PLAIN;
  const proto = Object.getPrototypeOf(value);
  if (Array.isArray(value)) {
    if (proto !== Array.prototype || typeof (value as { toJSON?: unknown }).toJSON === 'function') {
      throw NOT_PLAIN;
    }
    let text = '[';
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const skipped = item === undefined || typeof item === 'function' || typeof item === 'symbol';
      text += (i === 0 ? '' : ',') + (skipped ? 'null' : plainJson(item, depth + 1));
    }
    return `${text}]`;
  }
  const object = value as Record<string, unknown>;
  if ((proto !== Object.prototype && proto !== null) || typeof object.toJSON === 'function') throw NOT_PLAIN;
  const keys = Object.keys(object);
  // Object.keys lists integer-like keys first, in numeric order, then the others as inserted; a copy with
  // sorted keys enumerates the same way, so only the others are sorted.
  let named = 0;
  while (named < keys.length && isArrayIndex(keys[named] as string)) named++;
  const ordered = named === 0 ? keys.sort() : keys.slice(0, named).concat(keys.slice(named).sort());
  let text = '{';
  for (const key of ordered) {
    const item = object[key];
    if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
    text += `${text.length === 1 ? '' : ','}${JSON.stringify(key)}:${plainJson(item, depth + 1)}`;
  }
  return `${text}}`;
}

/** True when `value` is plain JSON whose keys already come in {@link plainJson}'s order, at every depth. */
function isOrdered(value: unknown, depth: number): boolean {
  if (typeof value !== 'object') return typeof value !== 'bigint';
  if (value === null) return true;
  if (depth > MAX_PLAIN_DEPTH) return false;
  const proto = Object.getPrototypeOf(value);
  if (Array.isArray(value)) {
    if (proto !== Array.prototype || typeof (value as { toJSON?: unknown }).toJSON === 'function')
      return false;
    for (let i = 0; i < value.length; i++) if (!isOrdered(value[i], depth + 1)) return false;
    return true;
  }
  const object = value as Record<string, unknown>;
  if ((proto !== Object.prototype && proto !== null) || typeof object.toJSON === 'function') return false;
  const keys = Object.keys(object);
  let named = 0;
  while (named < keys.length && isArrayIndex(keys[named] as string)) named++;
  for (let i = named; i < keys.length; i++) {
    // Strictly ascending by UTF-16 code units, as `sort()` orders them.
    if (i > named && !((keys[i - 1] as string) < (keys[i] as string))) return false;
    if (!isOrdered(object[keys[i] as string], depth + 1)) return false;
  }
  for (let i = 0; i < named; i++) if (!isOrdered(object[keys[i] as string], depth + 1)) return false;
  return true;
}

/** True for a canonical array index (`0` … `4294967294`), the keys JavaScript enumerates first. */
function isArrayIndex(key: string): boolean {
  return /^(?:0|[1-9]\d{0,9})$/.test(key) && Number(key) < 4_294_967_295;
}
