import {
  type IdSource,
  type IdVerdict,
  messageIdReader,
  type RecordParts,
} from '../adapters/kafka/message-id.js';
import { toKey } from '../repositories/ids.js';

/**
 * The node's id reader: {@link messageIdReader}'s verdicts, faster for ids in a JSON value. `JSON.parse` of every
 * value builds an object the node throws away, and was the node's largest cost after kafkajs and the store. A
 * byte scanner validates the JSON and finds the field without building anything; whatever it does not handle
 * cheaply (invalid JSON, escaped keys, arrays on the path, an id that is not a plain string or number) goes to
 * the adapter's reader, so every verdict, error text included, is exactly the adapter's.
 */
export function nodeIdReader(source: IdSource): (record: RecordParts) => IdVerdict {
  const slow = messageIdReader(source);
  if (source.from !== 'value') return slow;
  const scan = jsonFieldScanner(source.path.split('.'));
  return (record) => {
    const value = record.value;
    if (value === null) return slow(record);
    const found = scan(value);
    if (found === undefined) return slow(record);
    if (found === ABSENT) return NO_ID;
    if (found.kind === 'number') {
      const n = Number(value.toString('latin1', found.start, found.end));
      return Number.isFinite(n) ? { ok: true, id: String(n) } : slow(record);
    }
    if (found.start === found.end) return NO_ID;
    const text = found.escaped
      ? (JSON.parse(value.toString('utf8', found.start - 1, found.end + 1)) as string)
      : value.toString('utf8', found.start, found.end);
    try {
      return { ok: true, id: toKey(text) };
    } catch {
      return slow(record); // the adapter words the invalid-id verdict
    }
  };
}

/** Where the field's value lies in the bytes: a string's content (inside the quotes) or a number's text. */
export interface FieldSpan {
  readonly kind: 'string' | 'number';
  readonly start: number;
  readonly end: number;
  /** The string holds backslash escapes, so its text needs decoding. */
  readonly escaped: boolean;
}

/** The value is valid JSON without the field (or with `null` there): no id. */
export const ABSENT: unique symbol = Symbol('absent');

const NO_ID: IdVerdict = Object.freeze({ ok: true, id: undefined });

/** Thrown inside the scanner to give up (not an error: the adapter's reader then decides); caught at its top. */
const GIVE_UP: unique symbol = Symbol('give up');

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Compiles a dotted path into a scanner of JSON bytes. It returns the span of the field at the path (the last
 * one, as `JSON.parse` keeps the last of repeated keys), {@link ABSENT}, or undefined when it cannot decide:
 * the bytes are not valid JSON, a key on the way has escapes, an array is on the way, or the field holds
 * something other than a string, a number or null.
 */
export function jsonFieldScanner(
  path: readonly string[],
): (bytes: Uint8Array) => FieldSpan | typeof ABSENT | undefined {
  const scanner = new Scanner(path.map((step) => Buffer.from(step, 'utf8')));
  return (bytes) => scanner.scan(bytes);
}

/** One reusable scanner (state in fields, no closures per call: this runs once per record). */
class Scanner {
  private b: Uint8Array = EMPTY;
  private i = 0;
  private found: FieldSpan | typeof ABSENT = ABSENT;
  private readonly depth: number;

  constructor(private readonly steps: readonly Buffer[]) {
    this.depth = steps.length;
  }

  scan(bytes: Uint8Array): FieldSpan | typeof ABSENT | undefined {
    this.b = bytes;
    this.i = 0;
    this.found = ABSENT;
    try {
      this.value(0);
      this.ws();
      return this.i === bytes.length ? this.found : undefined;
    } catch (error) {
      if (error === GIVE_UP || error instanceof RangeError) return undefined; // RangeError: nested too deep
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

  /** A value; `matched` path steps lead here (-1: off the path). */
  private value(matched: number): void {
    this.ws();
    const c = this.b[this.i];
    const atField = matched === this.depth;
    if (c === 0x7b) {
      if (atField) throw GIVE_UP;
      this.object(matched);
    } else if (c === 0x5b) {
      if (matched >= 0) throw GIVE_UP; // an array on the path: leave indexing to JSON.parse
      this.array();
    } else if (c === QUOTE) {
      const start = this.i + 1;
      const escaped = this.string();
      if (atField) this.found = { kind: 'string', start, end: this.i - 1, escaped };
    } else if (c === 0x74) {
      if (atField) throw GIVE_UP;
      this.literal(TRUE);
    } else if (c === 0x66) {
      if (atField) throw GIVE_UP;
      this.literal(FALSE);
    } else if (c === 0x6e) {
      this.literal(NULL);
    } else {
      const start = this.i;
      this.number();
      if (atField) this.found = { kind: 'number', start, end: this.i, escaped: false };
    }
  }

  private object(matched: number): void {
    const b = this.b;
    this.i++;
    this.ws();
    if (b[this.i] === 0x7d) {
      this.i++;
      return;
    }
    for (;;) {
      this.ws();
      if (b[this.i] !== QUOTE) throw GIVE_UP;
      const keyStart = this.i + 1;
      const escaped = this.string();
      let next = -1;
      if (matched >= 0) {
        if (escaped) throw GIVE_UP;
        if (sameKey(b, keyStart, this.i - 1, this.steps[matched] as Buffer)) {
          next = matched + 1;
          // A repeated key replaces the earlier value wholesale, as in JSON.parse.
          this.found = ABSENT;
        }
      }
      this.ws();
      if (b[this.i] !== 0x3a) throw GIVE_UP;
      this.i++;
      this.value(next);
      this.ws();
      const c = b[this.i++];
      if (c === 0x7d) return;
      if (c !== 0x2c) throw GIVE_UP;
    }
  }

  private array(): void {
    const b = this.b;
    this.i++;
    this.ws();
    if (b[this.i] === 0x5d) {
      this.i++;
      return;
    }
    for (;;) {
      this.value(-1);
      this.ws();
      const c = b[this.i++];
      if (c === 0x5d) return;
      if (c !== 0x2c) throw GIVE_UP;
    }
  }

  /** Skips a string starting at its opening quote; returns whether it held escapes. */
  private string(): boolean {
    const b = this.b;
    const n = b.length;
    let i = this.i + 1;
    let escaped = false;
    for (;;) {
      if (i >= n) throw GIVE_UP;
      const c = b[i] as number;
      if (c === QUOTE) break;
      if (c < 0x20) throw GIVE_UP;
      if (c !== BACKSLASH) {
        i++;
        continue;
      }
      escaped = true;
      const e = b[i + 1];
      if (e === 0x75) {
        for (let k = 2; k < 6; k++) if (!isHex(b[i + k])) throw GIVE_UP;
        i += 6;
      } else if (
        e === QUOTE ||
        e === BACKSLASH ||
        e === 0x2f ||
        e === 0x62 ||
        e === 0x66 ||
        e === 0x6e ||
        e === 0x72 ||
        e === 0x74
      ) {
        i += 2;
      } else throw GIVE_UP;
    }
    this.i = i + 1;
    return escaped;
  }

  private number(): void {
    const b = this.b;
    let i = this.i;
    if (b[i] === 0x2d) i++;
    if (b[i] === 0x30) i++;
    else if (isDigit19(b[i])) while (isDigit(b[i])) i++;
    else throw GIVE_UP;
    if (b[i] === 0x2e) {
      i++;
      if (!isDigit(b[i])) throw GIVE_UP;
      while (isDigit(b[i])) i++;
    }
    if (b[i] === 0x65 || b[i] === 0x45) {
      i++;
      if (b[i] === 0x2b || b[i] === 0x2d) i++;
      if (!isDigit(b[i])) throw GIVE_UP;
      while (isDigit(b[i])) i++;
    }
    this.i = i;
  }

  private literal(word: readonly number[]): void {
    const b = this.b;
    for (const c of word) if (b[this.i++] !== c) throw GIVE_UP;
  }
}

const EMPTY = new Uint8Array(0);
const TRUE = [0x74, 0x72, 0x75, 0x65];
const FALSE = [0x66, 0x61, 0x6c, 0x73, 0x65];
const NULL = [0x6e, 0x75, 0x6c, 0x6c];

function isDigit(c: number | undefined): boolean {
  return c !== undefined && c >= 0x30 && c <= 0x39;
}

function isDigit19(c: number | undefined): boolean {
  return c !== undefined && c >= 0x31 && c <= 0x39;
}

function isHex(c: number | undefined): boolean {
  return (
    c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66))
  );
}

/** Key bytes equal to a path step's UTF-8; a key with bytes that are not valid UTF-8 is compared as decoded. */
function sameKey(b: Uint8Array, start: number, end: number, step: Buffer): boolean {
  if (end - start !== step.length) {
    return (
      hasHighBytes(b, start, end) &&
      Buffer.from(b.buffer, b.byteOffset + start, end - start).toString('utf8') === step.toString('utf8')
    );
  }
  for (let k = 0; k < step.length; k++) {
    if (b[start + k] !== step[k]) {
      return (
        hasHighBytes(b, start, end) &&
        Buffer.from(b.buffer, b.byteOffset + start, end - start).toString('utf8') === step.toString('utf8')
      );
    }
  }
  return true;
}

function hasHighBytes(b: Uint8Array, start: number, end: number): boolean {
  for (let k = start; k < end; k++) if ((b[k] as number) >= 0x80) return true;
  return false;
}
