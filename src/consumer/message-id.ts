import { InvalidIdError } from '../errors.js';
import { toKey } from '../repositories/ids.js';
import type { MessageId } from '../repositories/types.js';
import type { IdSelector } from './types.js';

/** Reads `a.b.c` out of a plain object; undefined as soon as a step is missing. */
export function readPath(value: unknown, path: readonly string[]): unknown {
  let current = value;
  for (const step of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[step];
  }
  return current;
}

/**
 * Builds the function that turns a message into its canonical key: `undefined` for "no id" (null or undefined
 * only), a string key otherwise. An empty string or empty bytes is an id, not a missing one (as KIP-655 treats an
 * empty key): processing-time mode rejects it as InvalidIdError, event-time mode deduplicates it like any key.
 * Objects, booleans, unsafe integers and oversized ids throw InvalidIdError.
 */
export function idExtractor<M>(selector: IdSelector<M>): (message: M) => string | undefined {
  if (typeof selector === 'function') return (message) => normalize(selector(message));
  const path = selector.split('.');
  if (path.some((step) => step.length === 0))
    throw new InvalidIdError(`bad id path ${JSON.stringify(selector)}`);
  // One field (the usual `id: 'id'`): read in the extractor itself, one call less per message.
  const field = path[0] as string;
  if (path.length === 1) return (message) => normalize((message as Record<string, unknown>)?.[field]);
  return (message) => normalize(readPath(message, path));
}

/** The key of an empty byte id: the canonical encoding of zero bytes, which `toKey` itself refuses to store. */
const EMPTY_BYTES = '\u0000b64:';

function normalize(value: unknown): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (value === '') return '';
  if (typeof value === 'string') return toKey(value);
  if (typeof value === 'number') {
    // A rounded integer would merge distinct ids (2^53 + 1 reads as 2^53): refuse it, never round.
    if (Number.isInteger(value) && !Number.isSafeInteger(value))
      throw new InvalidIdError(
        `id ${value} is an integer beyond 2^53 and may have been rounded; send it as a string or bigint`,
      );
    if (!Number.isFinite(value)) throw new InvalidIdError(`id must be a finite number, got ${value}`);
    return String(value);
  }
  if (typeof value === 'bigint') return String(value);
  if (value instanceof Uint8Array) return value.byteLength === 0 ? EMPTY_BYTES : toKey(value as MessageId);
  throw new InvalidIdError(
    `id must be a string, number or bytes, got ${Array.isArray(value) ? 'array' : typeof value}`,
  );
}
