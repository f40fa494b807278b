import * as crypto from 'node:crypto';
import { errorMessage, InvalidInputError } from '../errors.js';
import { readPath } from './message-id.js';
import type { FingerprintSelector } from './options.js';

/**
 * Canonical JSON (keys sorted): bytes, bigints, Maps and Sets (members sorted) are tagged (`{"$bytes":…}`, …,
 * `{"$set":…}`), `toJSON` is honoured; a WeakMap, WeakSet, Promise, cycle or nesting deeper than 1000 throws.
 */
export function canonicalJson(value: unknown): string {
  return write(value, 0);
}

/** Deeper than this is taken for a cycle: cheaper than remembering every object on the path. */
const MAX_DEPTH = 1000;

/** A string, number or boolean as `JSON.stringify` writes it; undefined for other values. Shared with the HTTP adapter. */
export function scalarJson(value: unknown): string | undefined {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? String(value) : 'null';
    case 'boolean':
      return value ? 'true' : 'false';
    default:
      return undefined;
  }
}

function write(value: unknown, depth: number): string {
  const scalar = scalarJson(value);
  if (scalar !== undefined) return scalar;
  if (typeof value === 'bigint') return `{"$bigint":"${value.toString()}"}`;
  if (typeof value !== 'object' || value === null) return 'null';
  if (depth > MAX_DEPTH) {
    throw new TypeError(`the message is nested deeper than ${MAX_DEPTH} levels or has a cycle`);
  }
  if (value instanceof Uint8Array) {
    const base64 = Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64');
    return `{"$bytes":"${base64}"}`;
  }
  if (value instanceof Map) {
    const pairs = [...value].map(([k, v]) => `[${write(k, depth + 1)},${write(v, depth + 1)}]`).sort();
    return `{"$map":[${pairs.join(',')}]}`;
  }
  if (value instanceof Set) {
    const members = [...value].map((v) => write(v, depth + 1)).sort();
    return `{"$set":[${members.join(',')}]}`;
  }
  if (value instanceof WeakMap || value instanceof WeakSet || value instanceof Promise) {
    throw new TypeError(
      `a ${value.constructor.name} cannot be fingerprinted (its contents cannot be read); ` +
        'leave it out with a list of fields or a function',
    );
  }
  if (Array.isArray(value)) {
    let text = '[';
    for (let i = 0; i < value.length; i++) text += (i === 0 ? '' : ',') + write(value[i], depth + 1);
    return `${text}]`;
  }
  const object = value as { toJSON?: () => unknown } & Record<string, unknown>;
  if (typeof object.toJSON === 'function') return write(object.toJSON(), depth + 1);
  let text = '{';
  for (const key of Object.keys(object).sort()) {
    const item = object[key];
    if (item === undefined || typeof item === 'function' || typeof item === 'symbol') continue;
    text += `${text.length === 1 ? '' : ','}${JSON.stringify(key)}:${write(item, depth + 1)}`;
  }
  return `${text}}`;
}

type OneShotHash = (algorithm: string, data: string | Uint8Array, encoding: 'base64url') => string;
// `crypto.hash` (Node 20.12+) is a one-shot digest several times cheaper than a Hash object per message.
const oneShot = (crypto as { hash?: OneShotHash }).hash;

/** SHA-256 of the text's UTF-8 bytes (or of the bytes), base64url: 43 characters whatever the payload. */
export function digest(data: string | Uint8Array): string {
  if (oneShot !== undefined) return oneShot('sha256', data, 'base64url');
  return crypto.createHash('sha256').update(data).digest('base64url');
}

/** Marks a fingerprint function whose value is already a digest (see {@link preDigested}). */
const PRE_DIGESTED = Symbol('idempotent-consumer pre-digested fingerprint');

type PreDigested<M> = ((message: M) => string) & { readonly [PRE_DIGESTED]: true };

/**
 * A `fingerprint` function whose value is already a digest (the HTTP adapter's), kept as it is; records of
 * earlier versions kept its digest, which {@link fingerprintMatches} accepts too.
 */
export function preDigested<M>(fingerprint: (message: M) => string): (message: M) => string {
  return Object.assign((message: M) => fingerprint(message), { [PRE_DIGESTED]: true as const });
}

function isPreDigested<M>(selector: FingerprintSelector<M>): selector is PreDigested<M> {
  return typeof selector === 'function' && (selector as Partial<PreDigested<M>>)[PRE_DIGESTED] === true;
}

/** Whether kept fingerprint `expected` matches `actual`: the same, or for a {@link preDigested} selector its digest. */
export function fingerprintMatches<M>(
  selector: FingerprintSelector<M> | undefined,
  actual: string,
  expected: string,
): boolean {
  return (
    actual === expected || (selector !== undefined && isPreDigested(selector) && digest(actual) === expected)
  );
}

/** A message's fingerprint under the `fingerprint` option; one that cannot be computed is an InvalidInputError. */
export function fingerprinter<M>(selector: FingerprintSelector<M>): (message: M) => string {
  const source = sourceOf(selector);
  const digested = isPreDigested(selector);
  return (message) => {
    let data: unknown;
    try {
      data = source(message);
    } catch (error) {
      throw new InvalidInputError(
        'option fingerprint',
        `cannot compute the fingerprint: ${errorMessage(error)}`,
      );
    }
    if (typeof data !== 'string' && !(data instanceof Uint8Array)) {
      throw new InvalidInputError(
        'option fingerprint',
        `the function must return a string or a Uint8Array, got ${data === null ? 'null' : typeof data}`,
      );
    }
    return digested ? (data as string) : digest(data);
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
