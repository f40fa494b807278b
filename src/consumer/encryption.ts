import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ConfigError } from '../errors.js';

/**
 * AES-256-GCM encryption of kept outcomes. Each record names its key, so keys rotate without a migration: add
 * the new key as `currentKeyId`, and keep the old ones until their records have expired.
 */
export interface OutcomeEncryptionOptions {
  /** The keys by key id (`A-Z a-z 0-9 . _ -`, at most 64): 32 bytes each, as bytes or base64 text. */
  readonly keys: Readonly<Record<string, string | Uint8Array>>;
  /** The key new records are written with; one of `keys`. */
  readonly currentKeyId: string;
  /** Read plaintext outcomes kept before encryption was on, instead of refusing them (for one `ttlMs`). */
  readonly allowPlaintext?: boolean;
}

/** The tag of an encrypted outcome (plain outcomes start with `v` or `e`). */
export const SEALED = 'x';
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Why an encrypted outcome could not be opened. */
export class UnreadableOutcome {
  constructor(readonly reason: string) {}
}

/** Seals and opens kept outcomes, with the record's id as authenticated data (a copy to another id fails). */
export class OutcomeCipher {
  readonly allowPlaintext: boolean;
  readonly #keys: ReadonlyMap<string, Buffer>;
  readonly #currentId: string;
  readonly #current: Buffer;

  constructor(options: OutcomeEncryptionOptions, owner: string) {
    const fail = (key: string, message: string) =>
      new ConfigError(`encryption${key}`, message, { label: `option encryption${key} of ${owner}` });
    if (typeof options?.keys !== 'object' || options.keys === null) {
      throw new ConfigError('encryption', 'must be { keys: { <key id>: <32-byte key> }, currentKeyId }', {
        label: 'option encryption',
      });
    }
    const keys = new Map<string, Buffer>();
    for (const [id, value] of Object.entries(options.keys)) {
      if (!KEY_ID.test(id)) {
        throw fail('.keys', `key id ${JSON.stringify(id)} must be 1 to 64 characters of A-Z a-z 0-9 . _ -`);
      }
      const bytes =
        typeof value === 'string'
          ? Buffer.from(value, 'base64')
          : value instanceof Uint8Array
            ? Buffer.from(value)
            : undefined;
      if (bytes === undefined || bytes.length !== 32) {
        // The key itself is never quoted: only its length.
        const got = bytes === undefined ? typeof value : `${bytes.length} bytes`;
        throw fail(`.keys.${id}`, `must be 32 bytes (AES-256), as a Uint8Array or base64 text; got ${got}`);
      }
      keys.set(id, bytes);
    }
    const current = keys.get(options.currentKeyId);
    if (current === undefined) {
      throw fail(
        '.currentKeyId',
        `must name one of the keys (${[...keys.keys()].join(', ') || 'none given'})`,
      );
    }
    this.#keys = keys;
    this.#currentId = options.currentKeyId;
    this.#current = current;
    this.allowPlaintext = options.allowPlaintext === true;
  }

  /** `x<key id>.<base64url of IV, ciphertext and tag>` (base64url has no `.`: the key id may). */
  seal(id: string, text: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#current, iv);
    cipher.setAAD(aad(id));
    const body = Buffer.concat([iv, cipher.update(text, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${SEALED}${this.#currentId}.${body.toString('base64url')}`;
  }

  /** The plain outcome text, or why it cannot be had. Never a guess: any doubt is an UnreadableOutcome. */
  open(id: string, sealed: string): string | UnreadableOutcome {
    const dot = sealed.lastIndexOf('.');
    const keyId = dot > 1 ? sealed.slice(1, dot) : '';
    const key = this.#keys.get(keyId);
    if (key === undefined) {
      return new UnreadableOutcome(
        `it was encrypted with key id ${JSON.stringify(keyId)}, which is not among the configured keys`,
      );
    }
    const body = Buffer.from(sealed.slice(dot + 1), 'base64url');
    if (body.length < IV_BYTES + TAG_BYTES) return new UnreadableOutcome('the encrypted record is cut short');
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, body.subarray(0, IV_BYTES));
      decipher.setAAD(aad(id));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      const plain = Buffer.concat([
        decipher.update(body.subarray(IV_BYTES, body.length - TAG_BYTES)),
        decipher.final(),
      ]);
      return plain.toString('utf8');
    } catch {
      return new UnreadableOutcome(
        `it does not authenticate under key id ${JSON.stringify(keyId)} (altered, or written for another id)`,
      );
    }
  }
}

function aad(id: string): Buffer {
  return Buffer.from(`idempotent-consumer outcome v1\0${id}`, 'utf8');
}
