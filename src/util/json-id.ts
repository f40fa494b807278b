import { isUtf8 } from 'node:buffer';
import { IdempotencyError, InvalidIdError } from '../errors.js';
import { MAX_ID_BYTES, toKey } from '../store/ids.js';

/**
 * Reads an id out of raw JSON bytes (`idem dedup`, the Kafka id reader). The bytes keep distinct ids distinct
 * where `JSON.parse` rounds integers above 2^53 and turns invalid UTF-8 into U+FFFD; and a byte scan validates
 * and finds the field without building the object. The id of a field: a string's text (`""`: no id; not valid
 * UTF-8: invalid), a number's exact plain decimal ({@link canonicalJsonNumber}); `null` or a missing field: no
 * id; an object, array or boolean: an invalid id.
 */

/** An id read from JSON: `ok` with the canonical key or undefined (no id), or why there is none usable. */
export type JsonIdVerdict =
  | { readonly ok: true; readonly id: string | undefined }
  | { readonly ok: false; readonly reason: 'invalid-json' | 'invalid-id'; readonly detail: string };

const NO_ID: JsonIdVerdict = Object.freeze({ ok: true, id: undefined });

/**
 * Compiles a dotted path (`meta.id`; a decimal step indexes an array: `items.0.id`) into a reader of JSON bytes.
 * It never throws. An `invalid-json` detail is `JSON.parse`'s own message; `invalid-id` details name the path.
 */
export function jsonIdReader(path: string | readonly string[]): (bytes: Uint8Array) => JsonIdVerdict {
  const steps = typeof path === 'string' ? path.split('.') : path;
  const name = steps.join('.');
  const scan = jsonFieldScanner(steps);
  return (bytes) => {
    const found = scan(bytes);
    if (found === undefined) return invalidJson(bytes);
    if (found === ABSENT) return NO_ID;
    try {
      return { ok: true, id: idOfSpan(bytes, found, name) };
    } catch (error) {
      if (error instanceof IdempotencyError)
        return { ok: false, reason: 'invalid-id', detail: error.message };
      throw error;
    }
  };
}

function idOfSpan(bytes: Uint8Array, span: FieldSpan, name: string): string | undefined {
  // Kafka hands the value as a Buffer already: a view of it would be one more object per record.
  const buffer = Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (span.kind) {
    case 'number':
      return canonicalJsonNumber(buffer.toString('latin1', span.start, span.end));
    case 'string': {
      const { start, end } = span;
      if (start === end) return undefined;
      // ASCII bytes (the usual id) are valid UTF-8 and decode as Latin-1 does: no view for `isUtf8`, no decoder.
      const ascii = isAscii(bytes, start, end);
      if (!ascii && !isUtf8(buffer.subarray(start, end))) {
        throw new InvalidIdError(`id field "${name}" is not valid UTF-8`);
      }
      const text = span.escaped
        ? (JSON.parse(buffer.toString('utf8', start - 1, end + 1)) as string)
        : buffer.toString(ascii ? 'latin1' : 'utf8', start, end);
      return text === '' ? undefined : toKey(text);
    }
    default:
      throw new InvalidIdError(
        `id field "${name}" must be a string or a number, got ${span.kind === 'boolean' ? 'a' : 'an'} ${span.kind}`,
      );
  }
}

/** True when every byte of `[start, end)` is below 0x80. */
function isAscii(bytes: Uint8Array, start: number, end: number): boolean {
  for (let k = start; k < end; k++) if ((bytes[k] as number) >= 0x80) return false;
  return true;
}

function invalidJson(bytes: Uint8Array): JsonIdVerdict {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  try {
    JSON.parse(text);
  } catch (error) {
    return { ok: false, reason: 'invalid-json', detail: (error as Error).message };
  }
  // Not reached for any input found so far: the scanner accepts exactly what JSON.parse accepts.
  return { ok: false, reason: 'invalid-json', detail: 'the id reader could not scan it' };
}

/**
 * The canonical id of a JSON number's source text: its exact value in plain decimal, with no exponent,
 * trailing fractional zeros or sign on zero (`1.0` → `1`, `-0` → `0`, `1e-7` → `0.0000001`), so equal numbers
 * share one id and different ones never do. Throws InvalidIdError when the digits would exceed the id size
 * limit (`1e2000`).
 */
export function canonicalJsonNumber(text: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!match) throw new InvalidIdError(`not a JSON number: ${JSON.stringify(text.slice(0, 40))}`);
  const [, sign = '', int = '', frac = '', exp = '0'] = match;
  let digits = (int + frac).replace(/^0+/, '');
  if (digits === '') return '0';
  const trailing = digits.length - digits.replace(/0+$/, '').length;
  digits = digits.slice(0, digits.length - trailing);
  // A huge exponent only ever makes the written-out number too long; Number() of its text is then never used.
  const exponent = exp.replace(/^[+-]?0*/, '').length > 9 ? Number.POSITIVE_INFINITY : Number(exp);
  const scale = exponent - frac.length + trailing; // value = digits × 10^scale
  const point = digits.length + scale; // digits before the decimal point
  const length =
    sign.length + (scale >= 0 ? point : point > 0 ? digits.length + 1 : 2 - point + digits.length);
  if (!(length <= MAX_ID_BYTES)) {
    throw new InvalidIdError(
      `number id ${text.length > 40 ? `${text.slice(0, 37)}...` : text} written out exceeds ${MAX_ID_BYTES} bytes`,
    );
  }
  let plain: string;
  if (scale >= 0) plain = digits + '0'.repeat(scale);
  else if (point > 0) plain = `${digits.slice(0, point)}.${digits.slice(point)}`;
  else plain = `0.${'0'.repeat(-point)}${digits}`;
  return sign + plain;
}

/** Where the field's value lies in the bytes: a string's content (inside the quotes), a number's text, or another kind. */
export interface FieldSpan {
  readonly kind: 'string' | 'number' | 'object' | 'array' | 'boolean';
  readonly start: number;
  readonly end: number;
  /** The string holds backslash escapes, so its text needs decoding. */
  readonly escaped: boolean;
}

/** The value is valid JSON without the field (or with `null` there): no id. */
export const ABSENT: unique symbol = Symbol('absent');

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/** A path step: its text, its UTF-8 bytes (a key's), and the array index it names (-1: none). */
interface Step {
  readonly text: string;
  readonly bytes: Buffer;
  readonly index: number;
}

/**
 * Compiles a dotted path into a scanner of JSON bytes: the span of the field at the path (the last of
 * repeated keys, as `JSON.parse`), {@link ABSENT}, or undefined when the bytes are not valid JSON. One pass
 * validates the whole value and finds the first step in it; a further step is looked up in the member found.
 */
export function jsonFieldScanner(
  path: readonly string[],
): (bytes: Uint8Array) => FieldSpan | typeof ABSENT | undefined {
  const steps: Step[] = path.map((text) => ({
    text,
    bytes: Buffer.from(text, 'utf8'),
    index: /^(0|[1-9]\d{0,8})$/.test(text) ? Number(text) : -1,
  }));
  const first = steps[0] as Step;
  return (b) => {
    const n = b.length;
    const start = wsEnd(b, 0, n);
    const c = b[start];
    const inside = c === OPEN_OBJECT || c === OPEN_ARRAY;
    const end = inside ? containerEnd(b, start, n, first) : valueEnd(b, start, n);
    if (end < 0 || wsEnd(b, end, n) !== n) return undefined;
    let found = inside ? member : ABSENT;
    for (let s = 1; s < steps.length && found !== ABSENT; s++) {
      if (found.kind !== 'object' && found.kind !== 'array') return ABSENT;
      containerEnd(b, found.start, found.end, steps[s] as Step);
      found = member;
    }
    return found;
  };
}

/** What {@link containerEnd} found of its step: the member's span, or ABSENT. */
let member: FieldSpan | typeof ABSENT = ABSENT;

/** Whether the last string {@link stringEnd} passed held a backslash escape. */
let lastEscaped = false;

/**
 * Past the object or array at `i`, validated (-1 if it is not valid JSON), leaving in {@link member} its member
 * `step` (for an object the last of repeated keys: it replaces the earlier value wholesale, as in JSON.parse).
 */
function containerEnd(b: Uint8Array, i: number, n: number, step: Step): number {
  member = ABSENT;
  let found: FieldSpan | typeof ABSENT = ABSENT;
  const object = b[i] === OPEN_OBJECT;
  const close = object ? CLOSE_OBJECT : CLOSE_ARRAY;
  const key = step.bytes;
  i = wsEnd(b, i + 1, n);
  if (i < n && b[i] === close) return i + 1;
  for (let k = 0; ; k++) {
    let match: boolean;
    if (object) {
      if (i >= n || b[i] !== QUOTE) return -1;
      const keyStart = i + 1;
      i = stringEnd(b, keyStart, n);
      if (i < 0) return -1;
      match = lastEscaped ? sameText(b, keyStart, i - 1, step.text) : sameBytes(b, keyStart, i - 1, key);
      i = wsEnd(b, i, n);
      if (i >= n || b[i] !== 0x3a) return -1;
      i = wsEnd(b, i + 1, n);
    } else match = k === step.index;
    const start = i;
    i = valueEnd(b, start, n);
    if (i < 0) return -1;
    if (match) found = spanOf(b[start] as number, start, i);
    i = wsEnd(b, i, n);
    if (i >= n) return -1;
    const c = b[i++];
    if (c === close) {
      member = found;
      return i;
    }
    if (c !== 0x2c) return -1;
    i = wsEnd(b, i, n);
  }
}

/** The span of a valid value `[start, end)` whose first byte is `c`; ABSENT for `null`. */
function spanOf(c: number, start: number, end: number): FieldSpan | typeof ABSENT {
  if (c === QUOTE) return { kind: 'string', start: start + 1, end: end - 1, escaped: lastEscaped };
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
    return { kind: c === OPEN_OBJECT ? 'object' : 'array', start, end, escaped: false };
  }
  if (c === 0x6e) return ABSENT;
  return { kind: c === 0x74 || c === 0x66 ? 'boolean' : 'number', start, end, escaped: false };
}

function sameBytes(b: Uint8Array, start: number, end: number, key: Uint8Array): boolean {
  if (end - start !== key.length) return false;
  for (let k = 0; k < key.length; k++) if (b[start + k] !== key[k]) return false;
  return true;
}

/** Whether the escaped key `[start, end)` reads as `text`. */
function sameText(b: Uint8Array, start: number, end: number, text: string): boolean {
  const raw = Buffer.from(b.buffer, b.byteOffset + start - 1, end - start + 2);
  // A key with bytes that are not UTF-8 is no path step's text (steps are text); never compare it replaced.
  return isUtf8(raw) && JSON.parse(raw.toString('utf8')) === text;
}

/** The first index from `i` on that is not JSON whitespace. */
function wsEnd(b: Uint8Array, i: number, n: number): number {
  while (i < n) {
    const c = b[i];
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
    else break;
  }
  return i;
}

/** Past the closing quote of a string whose content starts at `i`; -1 if it is not a valid JSON string. */
function stringEnd(b: Uint8Array, i: number, n: number): number {
  lastEscaped = false;
  for (;;) {
    if (i >= n) return -1;
    const kind = STRING_BYTE[b[i] as number];
    if (kind === 0) {
      i++;
      continue;
    }
    if (kind === 1) return i + 1;
    if (kind === 3) return -1;
    lastEscaped = true;
    const e = b[i + 1];
    if (e === 0x75) {
      for (let k = 2; k < 6; k++) if (!isHex(b[i + k])) return -1;
      i += 6;
    } else if (e !== undefined && SHORT_ESCAPE[e] === 1) {
      i += 2;
    } else return -1;
  }
}

/** Past a number starting at `i`; -1 if there is none. */
function numberEnd(b: Uint8Array, i: number, n: number): number {
  if (i < n && b[i] === 0x2d) i++;
  if (i < n && b[i] === 0x30) i++;
  else if (i < n && isDigit(b[i])) while (i < n && isDigit(b[i])) i++;
  else return -1;
  if (i < n && b[i] === 0x2e) {
    if (!(++i < n && isDigit(b[i]))) return -1;
    while (i < n && isDigit(b[i])) i++;
  }
  if (i < n && (b[i] === 0x65 || b[i] === 0x45)) {
    i++;
    if (i < n && (b[i] === 0x2b || b[i] === 0x2d)) i++;
    if (!(i < n && isDigit(b[i]))) return -1;
    while (i < n && isDigit(b[i])) i++;
  }
  return i;
}

/** Past the literal `word` at `i`; -1 if it is not there. */
function literalEnd(b: Uint8Array, i: number, n: number, word: readonly number[]): number {
  if (i + word.length > n) return -1;
  for (let k = 0; k < word.length; k++) if (b[i + k] !== word[k]) return -1;
  return i + word.length;
}

/** Open containers of {@link valueEnd} (reused: it runs for every member of every record). */
const openStack: number[] = [];

/** Past a key and its colon at `i`, whitespace after it skipped; -1 if there is none. */
function keyEnd(b: Uint8Array, i: number, n: number): number {
  if (i >= n || b[i] !== QUOTE) return -1;
  i = wsEnd(b, stringEnd(b, i + 1, n), n);
  if (i <= 0 || i >= n || b[i] !== 0x3a) return -1;
  return wsEnd(b, i + 1, n);
}

/**
 * Past the value starting at `i` (whitespace before it skipped), containers of any depth validated with an
 * explicit stack; -1 if it is not valid JSON. After a string value, `lastEscaped` is that string's.
 */
function valueEnd(b: Uint8Array, i: number, n: number): number {
  let depth = 0;
  for (;;) {
    if (i >= n) return -1;
    const c = b[i] as number;
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      i = wsEnd(b, i + 1, n);
      if (i < n && b[i] === (c === OPEN_OBJECT ? CLOSE_OBJECT : CLOSE_ARRAY)) i++;
      else {
        openStack[depth++] = c;
        if (c === OPEN_OBJECT) i = keyEnd(b, i, n);
        if (i < 0) return -1;
        continue;
      }
    } else if (c === QUOTE) i = stringEnd(b, i + 1, n);
    else if (c === 0x74) i = literalEnd(b, i, n, TRUE);
    else if (c === 0x66) i = literalEnd(b, i, n, FALSE);
    else if (c === 0x6e) i = literalEnd(b, i, n, NULL);
    else i = numberEnd(b, i, n);
    if (i < 0) return -1;
    // After a value: close containers, or go on to the next member or element.
    for (;;) {
      if (depth === 0) return i;
      i = wsEnd(b, i, n);
      if (i >= n) return -1;
      const d = b[i++];
      const top = openStack[depth - 1];
      if (d === 0x2c) {
        i = wsEnd(b, i, n);
        if (top === OPEN_OBJECT) i = keyEnd(b, i, n);
        if (i < 0) return -1;
        break;
      }
      if ((d === CLOSE_OBJECT && top === OPEN_OBJECT) || (d === CLOSE_ARRAY && top === OPEN_ARRAY)) depth--;
      else return -1;
    }
  }
}

/** 1 at the bytes that may follow a backslash on their own: `"`, `\`, `/`, `b`, `f`, `n`, `r`, `t`. */
const SHORT_ESCAPE = new Uint8Array(128);
for (const c of '"\\/bfnrt') SHORT_ESCAPE[c.charCodeAt(0)] = 1;
/** String content bytes: 0 plain, 1 the closing quote, 2 a backslash, 3 a control byte (not allowed). */
const STRING_BYTE = new Uint8Array(256);
STRING_BYTE.fill(3, 0, 0x20);
STRING_BYTE[QUOTE] = 1;
STRING_BYTE[BACKSLASH] = 2;
const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

function isHex(c: number | undefined): boolean {
  return (
    c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66))
  );
}
