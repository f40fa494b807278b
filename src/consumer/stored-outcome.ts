import { errorMessage, StoredFailureError, StoredOutcomeError } from '../errors.js';
import { redactText } from '../util/redact-text.js';
import { type OutcomeCipher, SEALED, UnreadableOutcome } from './encryption.js';
import type { FailureMessagePolicy, StoreResultOptions } from './options.js';

// The text kept in `IdempotencyRecord.result`: `v` + the serialized value, or `e` + JSON `{"name","message"}`.
const VALUE = 'v';
const FAILURE = 'e';

/** Longest error message kept with a failure, in UTF-16 units; the rest is cut (the name is always kept). */
const MAX_FAILURE_MESSAGE = 2_000;

/** What a stored outcome says when read back. */
type StoredOutcome =
  | { readonly kind: 'value'; readonly value: unknown }
  | { readonly kind: 'failure'; readonly error: StoredFailureError }
  /** The record holds no outcome this consumer can read (none kept, or the deserializer failed). */
  | { readonly kind: 'none' }
  /** Under `encryption`: the outcome cannot be decrypted or is plaintext; the duplicate fails closed. */
  | { readonly kind: 'unreadable'; readonly error: StoredOutcomeError };

const NONE: StoredOutcome = Object.freeze({ kind: 'none' });

/** What a kept `result` text is, without decoding it (for `idem inspect`). */
export function storedOutcomeKind(kept: string): 'value' | 'failure' | 'encrypted' | 'unknown' {
  const tag = kept[0];
  if (tag === VALUE) return 'value';
  if (tag === FAILURE) return 'failure';
  return tag === SEALED ? 'encrypted' : 'unknown';
}

/** Encodes outcomes for records and decodes them for duplicates; encoding never throws (undefined: not kept). */
export class OutcomeCodec {
  /** `storeResult` is on. */
  readonly keepsValues: boolean;
  readonly #maxBytes: number;
  readonly #serialize: (value: unknown) => string;
  readonly #deserialize: (text: string) => unknown;
  readonly #storeIf: ((value: unknown) => boolean) | undefined;
  readonly #failureMessage: FailureMessagePolicy;
  readonly #cipher: OutcomeCipher | undefined;

  constructor(
    storeResult: boolean | StoreResultOptions | undefined,
    storeMaxBytes: number,
    failureMessage: FailureMessagePolicy = 'redacted',
    cipher?: OutcomeCipher,
  ) {
    const options = typeof storeResult === 'object' ? storeResult : {};
    this.keepsValues = storeResult !== undefined && storeResult !== false;
    this.#maxBytes = Math.min(options.maxBytes ?? storeMaxBytes, storeMaxBytes);
    this.#serialize = options.serialize ?? serializeValue;
    this.#deserialize = options.deserialize ?? deserializeValue;
    this.#storeIf = options.storeIf;
    this.#failureMessage = failureMessage;
    this.#cipher = cipher;
  }

  /** The text to keep for a handler's value; undefined when refused, too large, or not serializable. */
  encodeValue(value: unknown, id: string): string | undefined {
    let text: string;
    try {
      if (this.#storeIf !== undefined && !this.#storeIf(value)) return undefined;
      const serialized = this.#serialize(value);
      // Joined, not `+`: one flat string, not a two-piece one that a memory store keeps (and the GC copies) as two.
      text = typeof serialized === 'string' ? [VALUE, serialized].join('') : VALUE + serialized;
    } catch {
      return undefined;
    }
    if (typeof text !== 'string') return undefined;
    const kept = this.#seal(id, text);
    return this.#fits(kept) ? kept : undefined;
  }

  #seal(id: string, text: string): string {
    return this.#cipher === undefined ? text : this.#cipher.seal(id, text);
  }

  /** The text to keep for a failure: its name and, unless `failureMessage: 'name'`, its redacted message. */
  encodeFailure(error: unknown, id: string): string | undefined {
    const name = error instanceof Error ? error.name : 'Error';
    const bare = this.#seal(id, FAILURE + JSON.stringify({ name, message: '' }));
    if (this.#failureMessage === 'name') return this.#fits(bare) ? bare : undefined;
    let message = redactText(errorMessage(error));
    if (message.length > MAX_FAILURE_MESSAGE) message = `${message.slice(0, MAX_FAILURE_MESSAGE)}…`;
    const full = this.#seal(id, FAILURE + JSON.stringify({ name, message }));
    if (this.#fits(full)) return full;
    return this.#fits(bare) ? bare : undefined;
  }

  /** Reads a stored outcome back; a value only when this consumer keeps values. */
  decode(id: string, kept: string | undefined): StoredOutcome {
    if (kept === undefined) return NONE;
    let text = kept;
    const cipher = this.#cipher;
    if (text[0] === SEALED) {
      if (cipher === undefined) {
        return unreadable(
          id,
          'it is encrypted, and this consumer has no encryption keys (option encryption)',
        );
      }
      const opened = cipher.open(id, text);
      if (opened instanceof UnreadableOutcome) return unreadable(id, opened.reason);
      text = opened;
    } else if (cipher !== undefined && !cipher.allowPlaintext) {
      return unreadable(
        id,
        'it is not encrypted, and only encrypted outcomes are accepted (encryption.allowPlaintext)',
      );
    }
    const tag = text[0];
    const body = text.slice(1);
    try {
      if (tag === FAILURE) {
        const { name, message } = JSON.parse(body) as { name?: unknown; message?: unknown };
        return {
          kind: 'failure',
          error: new StoredFailureError(id, String(name ?? 'Error'), String(message ?? '')),
        };
      }
      if (tag === VALUE && this.keepsValues) return { kind: 'value', value: this.#deserialize(body) };
    } catch {
      return NONE;
    }
    return NONE;
  }

  #fits(text: string): boolean {
    // A UTF-8 byte is at least one UTF-16 unit: short texts skip the byte count.
    return text.length * 3 <= this.#maxBytes || Buffer.byteLength(text, 'utf8') <= this.#maxBytes;
  }
}

function unreadable(id: string, reason: string): StoredOutcome {
  return { kind: 'unreadable', error: new StoredOutcomeError(id, reason) };
}

// The default serializer: JSON, with undefined, bigint and bytes tagged under a key JSON seldom uses (`\u0000t`);
// an object of the handler's own with that key is wrapped (`{"\u0000t":"object","v":{…}}`) to come back as it was.
const TAG = '\u0000t';

/** JSON that keeps undefined, bigint, Uint8Array and Buffer; see {@link StoreResultOptions}. */
export function serializeValue(value: unknown): string {
  // Objects being wrapped: the replacer sees each twice, as itself and as the wrapper's `v`.
  const wrapping = new Set<object>();
  return JSON.stringify(value, function (this: Record<string, unknown>, key, json: unknown) {
    const raw = this[key];
    if (raw === undefined) return { [TAG]: 'undefined' };
    if (json !== null && typeof json === 'object' && !Array.isArray(json) && Object.hasOwn(json, TAG)) {
      if (wrapping.delete(json)) return json;
      wrapping.add(json);
      return { [TAG]: 'object', v: json };
    }
    if (typeof raw === 'bigint') return { [TAG]: 'bigint', v: raw.toString() };
    if (raw instanceof Uint8Array) {
      const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('base64');
      return { [TAG]: Buffer.isBuffer(raw) ? 'buffer' : 'bytes', v: bytes };
    }
    return json;
  });
}

/** Inverse of {@link serializeValue}. */
export function deserializeValue(text: string): unknown {
  // A walk rather than a JSON.parse reviver: a reviver that answers undefined deletes the property.
  return untag(JSON.parse(text));
}

function untag(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) value[i] = untag(value[i]);
    return value;
  }
  const record = value as Record<string, unknown>;
  const tagged = Object.hasOwn(record, TAG) ? UNTAG.get(record[TAG]) : undefined;
  return tagged === undefined ? untagMembers(record) : tagged(record.v);
}

/** What each tag of {@link serializeValue} stands for, from its `v`. */
const UNTAG = new Map<unknown, (v: unknown) => unknown>([
  ['object', (v) => untagMembers(v as Record<string, unknown>)],
  ['undefined', () => undefined],
  ['bigint', (v) => BigInt(v as string)],
  ['buffer', (v) => Buffer.from(v as string, 'base64')],
  ['bytes', (v) => new Uint8Array(Buffer.from(v as string, 'base64'))],
]);

function untagMembers(record: Record<string, unknown>): Record<string, unknown> {
  for (const key of Object.keys(record)) {
    // Defined, not assigned: assigning `__proto__` would set the prototype instead of the member.
    Object.defineProperty(record, key, {
      value: untag(record[key]),
      writable: true,
      enumerable: true,
      configurable: true,
    });
  }
  return record;
}
