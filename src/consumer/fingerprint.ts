import { createHash } from 'node:crypto';
import { InvalidInputError } from '../errors.js';
import { readPath } from './message-id.js';
import type { FingerprintSelector } from './options.js';

/**
 * Canonical JSON: object keys sorted (by UTF-16 code units), so the same value gives the same text in any
 * process and whatever the key order. Bytes (Uint8Array, Buffer) become `{"$bytes":"<base64>"}`, a bigint
 * `{"$bigint":"<digits>"}`; `toJSON` is honoured (a Date is its ISO string); undefined properties are left out
 * and undefined array items are null, as in JSON. A cycle throws.
 */
export function canonicalJson(value: unknown): string {
  return write(value, new Set());
}

function write(value: unknown, seen: Set<object>): string {
  if (value === null || value === undefined) return 'null';
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
    case 'boolean':
      return JSON.stringify(value);
    case 'bigint':
      return `{"$bigint":${JSON.stringify(value.toString())}}`;
    case 'function':
    case 'symbol':
      return 'null';
  }
  if (value instanceof Uint8Array) {
    return `{"$bytes":${JSON.stringify(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64'))}}`;
  }
  const object = value as { toJSON?: () => unknown };
  if (typeof object.toJSON === 'function') return write(object.toJSON(), seen);
  if (seen.has(object)) throw new TypeError('the message has a cycle');
  seen.add(object);
  let text: string;
  if (Array.isArray(value)) {
    text = `[${value.map((item) => write(item, seen)).join(',')}]`;
  } else {
    const record = value as Record<string, unknown>;
    const parts: string[] = [];
    for (const key of Object.keys(record).sort()) {
      const item = record[key];
      if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
      parts.push(`${JSON.stringify(key)}:${write(item, seen)}`);
    }
    text = `{${parts.join(',')}}`;
  }
  seen.delete(object);
  return text;
}

/** SHA-256 of the text's UTF-8 bytes (or of the bytes), base64url: 43 characters whatever the payload. */
export function digest(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('base64url');
}

/**
 * The function that computes a message's fingerprint under the `fingerprint` option. A message whose
 * fingerprint cannot be computed (a cycle, a function that throws or returns something else) fails with an
 * InvalidInputError naming the option.
 */
export function fingerprinter<M>(selector: FingerprintSelector<M>): (message: M) => string {
  const source = sourceOf(selector);
  return (message) => {
    let data: unknown;
    try {
      data = source(message);
    } catch (error) {
      throw new InvalidInputError('option fingerprint', `cannot compute the fingerprint: ${reason(error)}`);
    }
    if (typeof data !== 'string' && !(data instanceof Uint8Array)) {
      throw new InvalidInputError(
        'option fingerprint',
        `the function must return a string or a Uint8Array, got ${data === null ? 'null' : typeof data}`,
      );
    }
    return digest(data);
  };
}

function sourceOf<M>(selector: FingerprintSelector<M>): (message: M) => unknown {
  if (selector === true) return (message) => canonicalJson(message);
  if (typeof selector === 'function') return selector;
  const paths = selector.map((p) => [p, p.split('.')] as const);
  // An object keyed by path: canonical JSON sorts it, so the list's order does not matter either.
  return (message) =>
    canonicalJson(Object.fromEntries(paths.map(([name, steps]) => [name, readPath(message, steps) ?? null])));
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
