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
 * Builds the function that turns a message into its canonical key: `undefined` for "no id" (null, undefined or
 * an empty string), a string key otherwise. Objects, booleans and oversized ids throw InvalidIdError.
 */
export function idExtractor<M>(selector: IdSelector<M>): (message: M) => string | undefined {
  const raw: (message: M) => unknown =
    typeof selector === 'function'
      ? selector
      : (() => {
          const path = selector.split('.');
          if (path.some((step) => step.length === 0))
            throw new InvalidIdError(`bad id path ${JSON.stringify(selector)}`);
          return path.length === 1
            ? (m: M) => (m as Record<string, unknown>)?.[path[0] as string]
            : (m: M) => readPath(m, path);
        })();
  return (message) => normalize(raw(message));
}

function normalize(value: unknown): string | undefined {
  if (value === null || value === undefined || value === '') return undefined;
  if (typeof value === 'string') return toKey(value);
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (value instanceof Uint8Array) return value.byteLength === 0 ? undefined : toKey(value as MessageId);
  throw new InvalidIdError(
    `id must be a string, number or bytes, got ${Array.isArray(value) ? 'array' : typeof value}`,
  );
}
