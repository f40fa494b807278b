import { InvalidIdError } from '../errors.js';
import { toKey } from '../store/ids.js';
import type { MessageId } from '../store/types.js';
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
 * The function from a message to its canonical key; `undefined` only for a null or undefined id (an empty one is
 * an id, as KIP-655 says). Objects, booleans, unsafe integers and oversized ids throw InvalidIdError.
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

/** Where `selector` reads the id, for messages: `at "order.id"`, or `from the id function` (`name`: `id`). */
export function idSource(selector: IdSelector<never>, name = 'id'): string {
  return typeof selector === 'string' ? `at ${JSON.stringify(selector)}` : `from the ${name} function`;
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

/**
 * Replay epochs: in epoch `e` an id's store key is that of the text `NUL "epoch:" e NUL k`, `k` its canonical key.
 * `e` holds no NUL, and ids that start with `NUL "epoch:"` are refused with or without an epoch (`reservedKey`),
 * so no two (epoch or none, k) share a key. Event-time keys start with `"`, so theirs stay distinct too.
 */
const EPOCH_MARK = '\u0000epoch:';
const RESERVED_KEY = `\u0000${EPOCH_MARK}`;

/** Epoch names: the characters an operator types in a TOML file or an env var, and never NUL. */
export const REPLAY_EPOCH = /^[A-Za-z0-9._:-]{1,64}$/;

/** The text every id of replay epoch `epoch` starts with before canonicalization; undefined without an epoch. */
export function replayEpochPrefix(epoch: string | number | undefined): string | undefined {
  return epoch === undefined ? undefined : `${EPOCH_MARK}${epoch}\u0000`;
}

/** A canonical key the consumer refuses: a text id starting with NUL "epoch:" (see replay epochs above). */
export function reservedKey(key: string): boolean {
  return key.charCodeAt(0) === 0 && key.startsWith(RESERVED_KEY);
}

/** The refusal of such an id. */
export function reservedKeyError(): InvalidIdError {
  return new InvalidIdError('ids that start with NUL "epoch:" are reserved for replay epochs');
}
