import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decodeResponse, encodeResponse } from '../../../src/adapters/http/codec.js';
import { HttpIdempotency } from '../../../src/adapters/http/core.js';
import { canonicalJson, requestFingerprint } from '../../../src/adapters/http/fingerprint.js';
import { readIdempotencyKey, scopedId } from '../../../src/adapters/http/key.js';
import { problemAnswer } from '../../../src/adapters/http/problem.js';
import { ConfigError, InvalidInputError } from '../../../src/errors.js';
import { MemoryRepository } from '../../../src/repositories/memory/index.js';
import { MAX_ID_BYTES } from '../../../src/store/ids.js';

describe('Idempotency-Key header', () => {
  it('reads the draft form, an sf-string, with its escapes', () => {
    assert.deepEqual(readIdempotencyKey('"8e03978e-40d5-43e8-bc93-6894a57f9324"', 255), {
      kind: 'key',
      key: '8e03978e-40d5-43e8-bc93-6894a57f9324',
    });
    assert.deepEqual(readIdempotencyKey('  "a \\"b\\" \\\\ c, d"  ', 255), {
      kind: 'key',
      key: 'a "b" \\ c, d',
    });
  });

  it('accepts a bare value leniently (a UUID sent without quotes)', () => {
    assert.deepEqual(readIdempotencyKey('8e03978e-40d5', 255), { kind: 'key', key: '8e03978e-40d5' });
    assert.deepEqual(readIdempotencyKey(['abc'], 255), { kind: 'key', key: 'abc' });
  });

  it('says absent for no header and refuses empty, malformed, repeated and long keys', () => {
    assert.deepEqual(readIdempotencyKey(undefined, 255), { kind: 'absent' });
    const problems = [
      ['', 'empty'],
      ['""', 'empty'],
      ['"abc', 'malformed'],
      ['"abc";p=1', 'malformed'],
      ['"a\\nb"', 'malformed'],
      ['"caf\u00e9"', 'malformed'],
      ['a b', 'malformed'],
      ['a, b', 'malformed'],
      ['"a", "b"', 'malformed'],
    ] as const;
    for (const [value, problem] of problems) {
      const reading = readIdempotencyKey(value, 255);
      assert.equal(reading.kind, 'invalid', value);
      assert.equal(reading.kind === 'invalid' && reading.problem, problem, value);
    }
    const repeated = readIdempotencyKey(['"a"', '"b"'], 255);
    assert.equal(repeated.kind === 'invalid' && repeated.problem, 'repeated');
    const long = readIdempotencyKey(`"${'k'.repeat(256)}"`, 255);
    assert.equal(long.kind === 'invalid' && long.problem, 'too-long');
    assert.match(long.kind === 'invalid' ? long.detail : '', /256 characters long; at most 255/);
    assert.equal(readIdempotencyKey(`"${'k'.repeat(255)}"`, 255).kind, 'key');
  });
});

describe('scoped ids', () => {
  it('differ by method, route, principal and key, and cannot be forged by the parts', () => {
    const ids = new Set([
      scopedId('POST', '/charges', undefined, 'k'),
      scopedId('PATCH', '/charges', undefined, 'k'),
      scopedId('POST', '/refunds', undefined, 'k'),
      scopedId('POST', '/charges', 'alice', 'k'),
      scopedId('POST', '/charges', 'bob', 'k'),
      scopedId('POST', '/charges', undefined, 'k2'),
      scopedId('POST', '/charges","alice', undefined, 'k'),
    ]);
    assert.equal(ids.size, 7);
  });

  it('stay within a store id when the scope is long', () => {
    const id = scopedId('POST', `/${'x'.repeat(2000)}`, 'p'.repeat(500), 'k'.repeat(255));
    assert.ok(Buffer.byteLength(id) <= MAX_ID_BYTES);
    assert.notEqual(id, scopedId('POST', `/${'x'.repeat(2000)}`, 'q'.repeat(500), 'k'.repeat(255)));
  });
});

describe('request fingerprints', () => {
  it('ignore JSON key order and tell apart method, target and body', () => {
    const base = { method: 'POST', target: '/charges', body: { amount: 10, meta: { a: 1, b: [1, 2] } } };
    const same = requestFingerprint({ ...base, body: { meta: { b: [1, 2], a: 1 }, amount: 10 } });
    assert.equal(requestFingerprint(base), same);
    assert.notEqual(requestFingerprint({ ...base, body: { amount: 11, meta: { a: 1, b: [1, 2] } } }), same);
    assert.notEqual(requestFingerprint({ ...base, method: 'PATCH' }), same);
    assert.notEqual(requestFingerprint({ ...base, target: '/charges?x=1' }), same);
    assert.notEqual(
      requestFingerprint({ ...base, body: 'text' }),
      requestFingerprint({ ...base, body: undefined }),
    );
    assert.notEqual(
      requestFingerprint({ ...base, body: Buffer.from('a') }),
      requestFingerprint({ ...base, body: 'a' }),
    );
    assert.equal(canonicalJson({ b: 1, a: { d: 1, c: 2 } }), '{"a":{"c":2,"d":1},"b":1}');
  });
});

/** The fingerprint as the adapter computed it before its one-call digest: every stored fingerprint is this. */
function fingerprintBefore(parts: { method: string; target: string; body: unknown }): string {
  const hash = createHash('sha256').update(parts.method).update('\0').update(parts.target).update('\0');
  const { body } = parts;
  if (body === undefined || body === null) hash.update('n');
  else if (typeof body === 'string') hash.update('s').update(body);
  else if (body instanceof Uint8Array) hash.update('b').update(body);
  else hash.update('j').update(canonicalJsonBefore(body));
  return hash.digest('base64url');
}

function canonicalJsonBefore(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || Buffer.isBuffer(v)) return v;
    const sorted: Record<string, unknown> = Object.create(null);
    for (const k of Object.keys(v).sort()) sorted[k] = (v as Record<string, unknown>)[k];
    return sorted;
  });
}

/** Any JSON value whose object keys come from `key`. */
function jsonValue(key: fc.Arbitrary<string>): fc.Arbitrary<unknown> {
  return fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.oneof(fc.string(), fc.double(), fc.integer(), fc.boolean(), fc.constant(null)),
      fc.array(tie('value')),
      fc.dictionary(key, tie('value')),
    ),
  })).value;
}

describe('request fingerprints are those earlier versions stored', () => {
  it('for any JSON body, text, bytes or none, any method and target (a retry across an upgrade still replays)', () => {
    // Keys that enumerate before the others (integer-like) and keys that sort apart from insertion order.
    const key = fc.oneof(
      fc.string(),
      fc.constantFrom('0', '2', '10', '01', '4294967294', '4294967295', '__proto__', 'toJSON'),
    );
    const json = jsonValue(key);
    const body = fc.oneof(
      json.map((text) => JSON.parse(JSON.stringify(text)) as unknown),
      json,
      fc.string(),
      fc.uint8Array().map((b) => Buffer.from(b)),
      fc.constantFrom(undefined, null),
    );
    fc.assert(
      fc.property(fc.string(), fc.string(), body, (method, target, b) => {
        const parts = { method, target, body: b };
        assert.equal(requestFingerprint(parts), fingerprintBefore(parts));
        if (b !== undefined && typeof b === 'object') assert.equal(canonicalJson(b), canonicalJsonBefore(b));
      }),
      { numRuns: 3_000, seed: 34 },
    );
  });

  it('for bodies whose keys already come in order (written by JSON.stringify), at every depth', () => {
    const key = fc.oneof(fc.string(), fc.constantFrom('0', '2', '10', '01', '4294967294', '4294967295'));
    const json = jsonValue(key);
    fc.assert(
      fc.property(json, (value) => {
        const ordered = JSON.parse(canonicalJsonBefore(value) ?? 'null') as unknown;
        assert.equal(canonicalJson(ordered), canonicalJsonBefore(ordered));
      }),
      { numRuns: 3_000, seed: 34 },
    );
    const deep: Record<string, unknown> = { a: 1 };
    let at = deep;
    // Deeper than the hand-written path goes: JSON.stringify with a sorting replacer writes it.
    for (let i = 0; i < 300; i++) {
      const next: Record<string, unknown> = { a: i };
      at.b = next;
      at = next;
    }
    const values: unknown[] = [
      {
        a: undefined,
        b: () => 1,
        c: Symbol('s'),
        d: Number.NaN,
        e: -0,
        f: [undefined, () => 1, Symbol('s')],
      },
      { 2: 'b', 10: 'a', '-1': 2, 1.5: 3, x: 1 },
      { a: new Date(0), b: { toJSON: () => ({ z: 1, y: 2 }) } },
      Object.assign(Object.create(null), { a: { c: [1, { e: 2, f: 1 }] }, b: 1 }),
      { a: { toJSON: 'not a function', b: 1 } },
      deep,
    ];
    for (const value of values) assert.equal(canonicalJson(value), canonicalJsonBefore(value));
    assert.throws(() => canonicalJson({ a: 1n }), TypeError);
  });

  it('for values a parsed body never holds: toJSON, dates, class instances, undefined and function members', () => {
    class Money {
      constructor(readonly amount: number) {}
    }
    const values: unknown[] = [
      { at: new Date(0), b: undefined, a: () => 1, c: Symbol('s') },
      [undefined, () => 1, Symbol('s'), new Money(5)],
      { toJSON: () => ({ z: 1, y: 2 }) },
      { nested: { toJSON: 'not a function', b: 1, a: 2 } },
      Object.assign(Object.create(null), { b: 1, a: { d: [1, { f: 1, e: 2 }] } }),
      { n: Number.NaN, i: Number.POSITIVE_INFINITY, z: -0, big: 1e21, small: 1e-7 },
      { s: 'lone \ud800 surrogate', '\u2028': 'line separator' },
      { 10: 'a', 2: 'b', x: 1, '-1': 2, 1.5: 3 },
      new Money(7),
      [new Uint8Array([1, 2])],
    ];
    for (const value of values) {
      assert.equal(canonicalJson(value), canonicalJsonBefore(value));
      const parts = { method: 'POST', target: '/x', body: value };
      assert.equal(requestFingerprint(parts), fingerprintBefore(parts));
    }
    // A bigint or a cycle is refused as JSON.stringify refuses it.
    assert.throws(() => canonicalJson({ a: 1n }), TypeError);
    const cycle: Record<string, unknown> = { a: 1 };
    cycle.self = { back: cycle };
    assert.throws(() => canonicalJson(cycle), RangeError);
    assert.throws(() => canonicalJsonBefore(cycle), RangeError);
  });
});

describe('stored responses', () => {
  it('round-trip any bytes and refuse what the adapter did not store', () => {
    const body = Buffer.from([0, 255, 0xc3, 0x28, 10, 13]);
    const response = { status: 201, headers: { 'content-type': 'image/png', 'x-a': ['1', '2'] }, body };
    const back = decodeResponse(encodeResponse(response));
    assert.equal(back.status, 201);
    assert.deepEqual(back.headers, response.headers);
    assert.ok(back.body.equals(body));
    assert.throws(() => decodeResponse('{"v":2}'), InvalidInputError);
    assert.throws(() => decodeResponse('nope'), InvalidInputError);
  });
});

describe('problems', () => {
  it('are application/problem+json with type, title, status and detail', () => {
    const answer = problemAnswer('key-reused', 'use a new key', { 'retry-after': '1' });
    assert.equal(answer.status, 422);
    assert.equal(answer.headers['content-type'], 'application/problem+json');
    assert.equal(answer.headers['retry-after'], '1');
    const body = JSON.parse(answer.body.toString());
    assert.deepEqual(Object.keys(body), ['type', 'title', 'status', 'detail']);
    assert.match(body.type, /^tag:idempotent-consumer,2026:http:key-reused$/);
  });
});

describe('adapter options', () => {
  const repository = new MemoryRepository();
  it('refuse a bad option by name', () => {
    assert.throws(
      () => new HttpIdempotency({ repository, maxKeyLength: 0 }),
      (e: unknown) =>
        e instanceof ConfigError && /option maxKeyLength of idempotencyKey\(\.\.\.\)/.test(e.message),
    );
    assert.throws(
      () => new HttpIdempotency({ repository, replayHeaders: ['bad header'] }),
      (e: unknown) => e instanceof ConfigError && /replayHeaders/.test(e.message),
    );
    assert.throws(
      () => new HttpIdempotency({ repository, nope: 1 } as never),
      (e: unknown) => e instanceof ConfigError && /nope/.test(e.message),
    );
    assert.throws(
      () => new HttpIdempotency({} as never),
      (e: unknown) => e instanceof ConfigError && /repository/.test(e.message),
    );
  });
});
