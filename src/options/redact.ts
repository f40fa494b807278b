import { REDACTED, redactUrl } from '../util/redact-text.js';
import { looseKey } from './schema-walk.js';

// Errors quote the value they reject, and the node logs what it runs with; neither may print a secret.

/** Secret keys as spelled in config and client objects (pino's `redact` paths are case-sensitive). */
const SECRET_NAMES = [
  'password',
  'passphrase',
  'secret',
  'secretAccessKey',
  'sessionToken',
  'token',
  'apiKey',
  'privateKey',
  'pfx',
  'sasl',
  'credentials',
  'encryption', // [consumer.encryption]: the keys of kept outcomes
];

/** Keys whose values are secrets wherever they appear, compared ignoring case, `_` and `-`; `key` is a TLS key. */
const SECRET_KEYS = new Set([...SECRET_NAMES.map((name) => name.toLowerCase()), 'key']);

/** True when a setting named `key` holds a secret (a password, a TLS key, SASL or cloud credentials). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEYS.has(looseKey(key));
}

/**
 * A copy of a config value with secret keys and URL passwords replaced, safe to print. A value is secret when
 * any step of its path is a secret key (`kafka.sasl.username` is inside a secret table).
 */
export function redactValue(value: unknown, path: readonly (string | number)[] = []): unknown {
  if (path.some((step) => typeof step === 'string' && isSecretKey(step))) {
    return value === undefined ? undefined : REDACTED;
  }
  if (typeof value === 'string') return redactUrl(value);
  if (Array.isArray(value)) return value.map((item, i) => redactValue(item, [...path, i]));
  if (value !== null && typeof value === 'object' && !(value instanceof Date)) {
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) copy[key] = redactValue(item, [...path, key]);
    return copy;
  }
  return value;
}

/** A short rendering of the value at `path` for messages, with secrets redacted. */
export function describeValue(value: unknown, path: readonly (string | number)[] = []): string {
  const safe = redactValue(value, path);
  if (safe === REDACTED) return REDACTED;
  let text: string | undefined;
  if (safe instanceof Date) text = safe.toISOString();
  else if (typeof safe === 'function') text = 'a function';
  else if (typeof safe === 'string' || typeof safe === 'object') text = JSON.stringify(safe);
  text ??= String(safe); // NaN, 10n, symbols, undefined
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * pino `redact` paths for the node's logs: secret keys at the depths a logged object or error can carry them.
 * A bare `key` is a Kafka message key in logs, so TLS keys are matched under `ssl`/`tls` only.
 */
export const logRedactPaths: readonly string[] = [
  ...SECRET_NAMES.flatMap((name) => [name, `*.${name}`, `*.*.${name}`, `*.*.*.${name}`]),
  ...['ssl', 'tls'].flatMap((table) => [`${table}.key`, `*.${table}.key`, `*.*.${table}.key`]),
];
