import { isUtf8 } from 'node:buffer';
import { IdempotencyError, InvalidIdError } from '../errors.js';
import { MAX_ID_BYTES, toKey } from '../store/ids.js';

/**
 * Reads an id out of raw JSON bytes, for `idem dedup` and the Kafka id reader. The bytes, not `JSON.parse`'s
 * result, keep distinct ids distinct: `JSON.parse` rounds integers above 2^53 and replaces invalid UTF-8 with
 * U+FFFD. A byte scan is also faster: it validates and finds the field without building the object.
 *
 * The id of a field: a string's text if its bytes are valid UTF-8 (else invalid; `""` is no id); a number's
 * exact value in plain decimal ({@link canonicalJsonNumber}); `null` or a missing field: no id; an object,
 * array or boolean: an invalid id.
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

/** Thrown inside the scanner when the bytes are not JSON; caught at its top. */
const NOT_JSON: unique symbol = Symbol('not JSON');

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/**
 * Compiles a dotted path into a scanner of JSON bytes: the span of the field at the path (the last of
 * repeated keys, as `JSON.parse`), {@link ABSENT}, or undefined when the bytes are not valid JSON.
 */
export function jsonFieldScanner(
  path: readonly string[],
): (bytes: Uint8Array) => FieldSpan | typeof ABSENT | undefined {
  const scanner = new Scanner(path);
  if (path.length !== 1) return (bytes) => scanner.scan(bytes);
  // A top-level field (`uid`, the usual id) in a top-level object: one tight pass, ~3× the general walk's speed.
  const key = Buffer.from(path[0] as string, 'utf8');
  return (bytes) => {
    const found = topLevelField(bytes, key);
    return found === UNSURE ? scanner.scan(bytes) : found;
  };
}

/** The fast path's "not decided here" (not an object at the top, an escaped key, or not valid JSON). */
const UNSURE: unique symbol = Symbol('unsure');

/** Whether the last string {@link stringEnd} passed held a backslash escape. */
let lastEscaped = false;

/**
 * The field `key` (UTF-8 bytes) of the top-level object in `b`, as {@link Scanner.scan} finds it, or UNSURE where
 * that scan must decide: it answers only for bytes it checked to be valid JSON through to the end.
 */
function topLevelField(b: Uint8Array, key: Uint8Array): FieldSpan | typeof ABSENT | typeof UNSURE {
  const n = b.length;
  let i = wsEnd(b, 0, n);
  if (i >= n || b[i] !== OPEN_OBJECT) return UNSURE;
  i = wsEnd(b, i + 1, n);
  let found: FieldSpan | typeof ABSENT = ABSENT;
  if (i < n && b[i] === CLOSE_OBJECT) i++;
  else {
    for (;;) {
      if (i >= n || b[i] !== QUOTE) return UNSURE;
      const keyStart = i + 1;
      i = stringEnd(b, keyStart, n);
      // An escaped key is compared unescaped by the general scan.
      if (i < 0 || lastEscaped) return UNSURE;
      const match = sameBytes(b, keyStart, i - 1, key);
      i = wsEnd(b, i, n);
      if (i >= n || b[i] !== 0x3a) return UNSURE;
      const start = wsEnd(b, i + 1, n);
      i = valueEnd(b, start, n);
      if (i < 0) return UNSURE;
      // A repeated key replaces the earlier value wholesale, as in JSON.parse; `null` is no field.
      if (match) found = spanOf(b[start] as number, start, i);
      i = wsEnd(b, i, n);
      if (i >= n) return UNSURE;
      const c = b[i++];
      if (c === CLOSE_OBJECT) break;
      if (c !== 0x2c) return UNSURE;
      i = wsEnd(b, i, n);
    }
  }
  return wsEnd(b, i, n) === n ? found : UNSURE;
}

/** The span of a valid value `[start, end)` whose first byte is `c`; ABSENT for `null`. */
function spanOf(c: number, start: number, end: number): FieldSpan | typeof ABSENT {
  if (c === QUOTE) return { kind: 'string', start: start + 1, end: end - 1, escaped: lastEscaped };
  if (c === OPEN_OBJECT || c === OPEN_ARRAY) return container(c, start, end);
  if (c === 0x6e) return ABSENT;
  return { kind: c === 0x74 || c === 0x66 ? 'boolean' : 'number', start, end, escaped: false };
}

function sameBytes(b: Uint8Array, start: number, end: number, key: Uint8Array): boolean {
  if (end - start !== key.length) return false;
  for (let k = 0; k < key.length; k++) if (b[start + k] !== key[k]) return false;
  return true;
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

/** Open containers of {@link valueEnd} (reused: the fast path runs once per record). */
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

/** One reusable scanner (state in fields, no closures per call: this runs once per record or line). */
class Scanner {
  private b: Uint8Array = EMPTY;
  private i = 0;
  private found: FieldSpan | typeof ABSENT = ABSENT;
  private readonly steps: readonly Buffer[];
  private readonly texts: readonly string[];
  /** Per step, the array index it names, or -1 when it is not a canonical decimal index. */
  private readonly indexes: readonly number[];
  /** The open containers (`{` or `[`), innermost last. */
  private readonly stack: number[] = [];
  /** How many of the bottom containers of the stack the path leads through. */
  private onPath = 0;
  /** Per path step, the index of the next element of the on-path array it indexes. */
  private readonly counters: number[];

  constructor(path: readonly string[]) {
    this.texts = path;
    this.steps = path.map((step) => Buffer.from(step, 'utf8'));
    this.indexes = path.map((step) => (/^(0|[1-9]\d{0,8})$/.test(step) ? Number(step) : -1));
    this.counters = path.map(() => 0);
  }

  scan(bytes: Uint8Array): FieldSpan | typeof ABSENT | undefined {
    this.b = bytes;
    this.i = 0;
    this.found = ABSENT;
    this.onPath = 0;
    this.stack.length = 0;
    try {
      this.walk();
      this.ws();
      return this.i === bytes.length ? this.found : undefined;
    } catch (error) {
      if (error === NOT_JSON) return undefined;
      throw error;
    } finally {
      this.b = EMPTY;
    }
  }

  private ws(): void {
    const b = this.b;
    let i = this.i;
    for (;;) {
      const c = b[i];
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) i++;
      else break;
    }
    this.i = i;
  }

  /**
   * Walks the whole value with an explicit stack of open containers, so nesting costs no call stack. The
   * containers the path leads through are the bottom `onPath` entries; the field is kept in `found`.
   */
  private walk(): void {
    const b = this.b;
    const stack = this.stack;
    const last = this.steps.length;
    /** The path steps that lead to the next value, or -1 when it is off the path. */
    let next = 0;
    /** The stack depth at which a container that is the field closes, and where it started. */
    let fieldDepth = -1;
    let fieldStart = 0;
    for (;;) {
      this.ws();
      const c = b[this.i];
      const start = this.i;
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
        this.i++;
        this.ws();
        if (b[this.i] === (c === OPEN_OBJECT ? CLOSE_OBJECT : CLOSE_ARRAY)) {
          this.i++;
          if (next === last) this.found = container(c, start, this.i);
        } else {
          stack.push(c);
          if (next === last) {
            fieldDepth = stack.length;
            fieldStart = start;
          } else if (next >= 0) {
            this.onPath = stack.length;
            this.counters[next] = 0;
          }
          next = c === OPEN_OBJECT ? this.member() : this.element();
          continue;
        }
      } else if (c === QUOTE) {
        const escaped = this.string();
        if (next === last) this.found = { kind: 'string', start: start + 1, end: this.i - 1, escaped };
      } else if (c === 0x6e) this.literal(NULL);
      else {
        if (c === 0x74) this.literal(TRUE);
        else if (c === 0x66) this.literal(FALSE);
        else this.number();
        if (next === last) {
          this.found = {
            kind: c === 0x74 || c === 0x66 ? 'boolean' : 'number',
            start,
            end: this.i,
            escaped: false,
          };
        }
      }
      // After a value: close containers or go on to the next member or element.
      for (;;) {
        if (stack.length === 0) return;
        this.ws();
        const d = b[this.i++];
        const top = stack[stack.length - 1] as number;
        if (d === 0x2c) {
          next = top === OPEN_OBJECT ? this.member() : this.element();
          break;
        }
        if ((d === CLOSE_OBJECT && top === OPEN_OBJECT) || (d === CLOSE_ARRAY && top === OPEN_ARRAY)) {
          if (stack.length === fieldDepth) {
            this.found = container(top, fieldStart, this.i);
            fieldDepth = -1;
          }
          if (stack.length === this.onPath) this.onPath--;
          stack.pop();
        } else throw NOT_JSON;
      }
    }
  }

  /** A member's key and colon; the path steps that lead to its value, or -1 when it is off the path. */
  private member(): number {
    this.ws();
    if (this.b[this.i] !== QUOTE) throw NOT_JSON;
    const keyStart = this.i + 1;
    const escaped = this.string();
    const depth = this.stack.length;
    let next = -1;
    if (depth === this.onPath && this.sameKey(keyStart, this.i - 1, escaped, depth - 1)) {
      next = depth;
      // A repeated key replaces the earlier value wholesale, as in JSON.parse.
      this.found = ABSENT;
    }
    this.ws();
    if (this.b[this.i++] !== 0x3a) throw NOT_JSON;
    return next;
  }

  /** The next element of the innermost array: on the path when a decimal step names its index. */
  private element(): number {
    const depth = this.stack.length;
    if (depth !== this.onPath) return -1;
    const k = (this.counters[depth - 1] as number)++;
    return k === this.indexes[depth - 1] ? depth : -1;
  }

  /** Skips a string starting at its opening quote; returns whether it held escapes. */
  private string(): boolean {
    const b = this.b;
    const n = b.length;
    let i = this.i + 1;
    let escaped = false;
    for (;;) {
      if (i >= n) throw NOT_JSON;
      const c = b[i] as number;
      if (c === QUOTE) break;
      if (c < 0x20) throw NOT_JSON;
      if (c !== BACKSLASH) {
        i++;
        continue;
      }
      escaped = true;
      const e = b[i + 1];
      if (e === 0x75) {
        for (let k = 2; k < 6; k++) if (!isHex(b[i + k])) throw NOT_JSON;
        i += 6;
      } else if (e !== undefined && SHORT_ESCAPE[e] === 1) {
        i += 2;
      } else throw NOT_JSON;
    }
    this.i = i + 1;
    return escaped;
  }

  private number(): void {
    const b = this.b;
    let i = this.i;
    if (b[i] === 0x2d) i++;
    // A leading 0 stands alone; any other digit starts a run.
    if (b[i] === 0x30) i++;
    else if (isDigit(b[i])) while (isDigit(b[i])) i++;
    else throw NOT_JSON;
    if (b[i] === 0x2e) {
      i++;
      if (!isDigit(b[i])) throw NOT_JSON;
      while (isDigit(b[i])) i++;
    }
    if (b[i] === 0x65 || b[i] === 0x45) {
      i++;
      if (b[i] === 0x2b || b[i] === 0x2d) i++;
      if (!isDigit(b[i])) throw NOT_JSON;
      while (isDigit(b[i])) i++;
    }
    this.i = i;
  }

  private literal(word: readonly number[]): void {
    const b = this.b;
    for (const c of word) if (b[this.i++] !== c) throw NOT_JSON;
  }

  /** Whether the key in `[start, end)` is path step `matched`: same bytes, or same text once unescaped. */
  private sameKey(start: number, end: number, escaped: boolean, matched: number): boolean {
    const b = this.b;
    if (escaped) {
      const raw = Buffer.from(b.buffer, b.byteOffset + start - 1, end - start + 2);
      // A key with bytes that are not UTF-8 is no path step's text (steps are text); never compare it replaced.
      return isUtf8(raw) && JSON.parse(raw.toString('utf8')) === this.texts[matched];
    }
    const step = this.steps[matched] as Buffer;
    if (end - start !== step.length) return false;
    for (let k = 0; k < step.length; k++) if (b[start + k] !== step[k]) return false;
    return true;
  }
}

function container(open: number, start: number, end: number): FieldSpan {
  return { kind: open === OPEN_OBJECT ? 'object' : 'array', start, end, escaped: false };
}

const EMPTY = new Uint8Array(0);
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
