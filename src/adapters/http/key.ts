import { digest } from '../../consumer/fingerprint.js';
import { MAX_ID_BYTES } from '../../store/ids.js';

/** Why an `Idempotency-Key` header value was refused; each becomes a 400 problem. */
export type KeyProblem = 'empty' | 'too-long' | 'malformed' | 'repeated';

/** The outcome of reading the header: absent, a key, or a reason to refuse it. */
export type KeyReading =
  | { readonly kind: 'absent' }
  | { readonly kind: 'key'; readonly key: string }
  | { readonly kind: 'invalid'; readonly problem: KeyProblem; readonly detail: string };

const ABSENT: KeyReading = Object.freeze({ kind: 'absent' });

// An sf-string (RFC 8941 §3.3.3): printable ASCII in quotes, only `"` and `\` escaped. Only the closing quote may
// end it: trailing parameters or list members are refused.
const QUOTED = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/;
// The lenient bare form: visible ASCII without the characters that would make it ambiguous with a quoted
// string or a list (`"`, `\`, `,`). A UUID sent without quotes, the most common mistake, is accepted.
const BARE = /^[\x21\x23-\x2b\x2d-\x5b\x5d-\x7e]+$/;

/**
 * Reads the `Idempotency-Key` header: an sf-string Item (`Idempotency-Key: "8e03978e-40d5-43e8"`) or the lenient
 * bare form (see docs/http.md). `maxLength` counts the key's characters, quotes excluded. Repeated header lines
 * and parameters after the string are refused: the field is a single Item.
 */
export function readIdempotencyKey(
  value: string | readonly string[] | undefined,
  maxLength: number,
): KeyReading {
  if (value === undefined) return ABSENT;
  if (typeof value !== 'string') {
    if (value.length === 0) return ABSENT;
    if (value.length > 1) {
      return invalid('repeated', 'the Idempotency-Key header was sent more than once; send exactly one');
    }
    return readIdempotencyKey(value[0], maxLength);
  }
  const text = value.trim();
  if (text === '') return invalid('empty', 'the Idempotency-Key header is empty');
  const key = text.startsWith('"') ? unquote(text) : BARE.test(text) ? text : undefined;
  if (key === undefined) {
    return invalid(
      'malformed',
      'the Idempotency-Key header must be a quoted string of printable ASCII ("…", per the draft), ' +
        'or a bare value of visible ASCII without quotes, backslashes, commas or spaces',
    );
  }
  if (key === '') return invalid('empty', 'the Idempotency-Key header holds an empty string');
  if (key.length > maxLength) {
    return invalid(
      'too-long',
      `the Idempotency-Key is ${key.length} characters long; at most ${maxLength} are accepted`,
    );
  }
  return { kind: 'key', key };
}

/** The value of an RFC 8941 sf-string that makes up the whole of `text`, or undefined if it is not one. */
function unquote(text: string): string | undefined {
  return QUOTED.exec(text)?.[1]?.replace(/\\(["\\])/g, '$1');
}

function invalid(problem: KeyProblem, detail: string): KeyReading {
  return { kind: 'invalid', problem, detail };
}

/**
 * The store id of a key: the route scope (method and route path), the principal (from the `scope` hook or the
 * request's credentials) and the key, encoded as a JSON array so no choice of parts can make two scopes meet.
 * A scope too long for a store id is replaced by its SHA-256 (the key stays readable at the end); if the key
 * itself is still too long (a key of quotes or backslashes doubles when escaped), scope and key together are.
 */
export function scopedId(
  method: string,
  route: string,
  principal: string | undefined,
  key: string,
  maxBytes: number = MAX_ID_BYTES,
): string {
  const id = JSON.stringify(['http', method, route, principal ?? null, key]);
  // A UTF-16 unit is at most three UTF-8 bytes: a short id skips the byte count.
  if (id.length * 3 <= maxBytes || Buffer.byteLength(id, 'utf8') <= maxBytes) return id;
  const scope = digest(JSON.stringify([method, route, principal ?? null]));
  const scoped = JSON.stringify(['http#', scope, key]);
  if (Buffer.byteLength(scoped, 'utf8') <= maxBytes) return scoped;
  return JSON.stringify(['http##', digest(JSON.stringify([method, route, principal ?? null, key]))]);
}

/**
 * The principal a request's credentials stand for: the SHA-256 of the credential headers it carries (names and
 * values); undefined for a request that carries none (the shared anonymous scope).
 */
export function credentialScope(
  request: { header(name: string): string | string[] | undefined },
  names: readonly string[],
): string | undefined {
  const carried: [string, string | string[]][] = [];
  for (const name of names) {
    const value = request.header(name);
    if (value !== undefined && value.length > 0) carried.push([name, value]);
  }
  if (carried.length === 0) return undefined;
  // One-shot where Node has it (see `digest`): the default scope digests every request's credentials.
  return `credentials:${digest(JSON.stringify(carried))}`;
}
