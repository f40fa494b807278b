import { createHash } from 'node:crypto';

/** What a request's fingerprint covers: method, target (path and query) and body. */
export interface RequestParts {
  readonly method: string;
  readonly target: string;
  readonly body: unknown;
}

/**
 * SHA-256 of the method, the request target and the body: a retry must send the same three to be a replay
 * (the draft's "request payload" check, widened to the target so a key moved to another resource is caught).
 * Bytes and text are hashed as sent; a parsed body (JSON) in a canonical form, so key order does not matter.
 */
export function requestFingerprint(parts: RequestParts): string {
  const hash = createHash('sha256').update(parts.method).update('\0').update(parts.target).update('\0');
  const { body } = parts;
  if (body === undefined || body === null) hash.update('n');
  else if (typeof body === 'string') hash.update('s').update(body);
  else if (body instanceof Uint8Array) hash.update('b').update(body);
  else hash.update('j').update(canonicalJson(body));
  return hash.digest('base64url');
}

/** JSON with object keys sorted at every depth: equal values give equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || Buffer.isBuffer(v)) return v;
    // Without a prototype: a body member named `__proto__` (JSON.parse keeps it as a member) must stay a
    // member of the copy, not become its prototype, or a changed body would fingerprint alike.
    const sorted: Record<string, unknown> = Object.create(null);
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}
