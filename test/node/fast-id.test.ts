import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { readPath } from '../../src/consumer/message-id.js';
import { type IdSource, type IdVerdict, messageIdReader } from '../../src/kafka/index.js';
import { toKey } from '../../src/store/ids.js';
import { ABSENT, canonicalJsonNumber, jsonFieldScanner } from '../../src/util/json-id.js';

/**
 * The reference the byte scanner must match: the adapter's former reader, `JSON.parse` then a path walk. Numbers
 * differ by design (the scanner keeps source digits), so the reference turns a parsed number back into the
 * canonical form of its shortest text; for generated JSON that text is the source text.
 */
function reference(value: Buffer | null, path: readonly string[]): IdVerdict {
  if (value === null) return { ok: true, id: undefined };
  let parsed: unknown;
  try {
    parsed = JSON.parse(value.toString('utf8'));
  } catch (error) {
    return {
      ok: false,
      reason: 'invalid-json',
      detail: `value is not valid JSON: ${(error as Error).message}`,
    };
  }
  const field = readPath(parsed, path);
  const name = path.join('.');
  try {
    if (field === null || field === undefined || field === '') return { ok: true, id: undefined };
    if (typeof field === 'string') return { ok: true, id: toKey(field) };
    if (typeof field === 'number') return { ok: true, id: canonicalJsonNumber(String(field)) };
    const kind = Array.isArray(field) ? 'array' : typeof field;
    return {
      ok: false,
      reason: 'invalid-id',
      detail: `id field "${name}" must be a string or a number, got ${kind === 'boolean' ? 'a' : 'an'} ${kind}`,
    };
  } catch (error) {
    return { ok: false, reason: 'invalid-id', detail: (error as Error).message };
  }
}

function agree(source: IdSource & { from: 'value' }, value: Buffer | null): void {
  const expected = reference(value, source.path.split('.'));
  const actual = messageIdReader(source)({ value });
  assert.deepEqual(actual, expected, `value ${JSON.stringify(value?.toString('latin1'))}`);
}

const uid = { from: 'value', path: 'uid' } as const;
const nested = { from: 'value', path: 'meta.id' } as const;
const indexed = { from: 'value', path: 'items.1.id' } as const;
const read = messageIdReader(uid);
const idOf = (text: string | Buffer) => read({ value: Buffer.from(text) });

describe('JSON id reader (byte scanner shared by the node, the adapter and idem dedup)', () => {
  it('reads the common shapes without JSON.parse', () => {
    const scan = jsonFieldScanner(['uid']);
    const span = scan(Buffer.from('{"n":1,"uid":"u-7","x":[1,{"uid":2}]}'));
    assert.ok(span !== undefined && span !== ABSENT);
    assert.equal(span.kind, 'string');
    assert.equal(scan(Buffer.from('{"n":1}')), ABSENT);
    assert.equal(scan(Buffer.from('{"uid":null}')), ABSENT);
    assert.equal(scan(Buffer.from('{"uid":"x"')), undefined, 'truncated: not JSON');
  });

  it('integers above 2^53 keep their digits: 9007199254740993 and 9007199254740992 are two ids', () => {
    assert.deepEqual(idOf('{"uid":9007199254740993}'), { ok: true, id: '9007199254740993' });
    assert.deepEqual(idOf('{"uid":9007199254740992}'), { ok: true, id: '9007199254740992' });
    assert.deepEqual(idOf('{"uid":-123456789012345678901234567890}'), {
      ok: true,
      id: '-123456789012345678901234567890',
    });
    assert.deepEqual(idOf('{"u\\u0069d":9007199254740993}'), { ok: true, id: '9007199254740993' });
    assert.deepEqual(
      messageIdReader(indexed)({ value: Buffer.from('{"items":[{"id":1},{"id":18446744073709551617}]}') }),
      {
        ok: true,
        id: '18446744073709551617',
      },
    );
  });

  it('a number id is its exact value in plain decimal: 1.0 is 1, -0 is 0, 1e3 is 1000', () => {
    const cases: [string, string][] = [
      ['1', '1'],
      ['1.0', '1'],
      ['1e0', '1'],
      ['10e-1', '1'],
      ['-0', '0'],
      ['-0.0e5', '0'],
      ['1e3', '1000'],
      ['1E+3', '1000'],
      ['1.50', '1.5'],
      ['-42.125', '-42.125'],
      ['1e-7', '0.0000001'],
      ['0.000123e2', '0.0123'],
      ['123.456e1', '1234.56'],
      ['1e21', '1000000000000000000000'],
      ['0.1', '0.1'],
      ['0.10000000000000001', '0.10000000000000001'],
    ];
    for (const [text, id] of cases) {
      assert.equal(canonicalJsonNumber(text), id, text);
      assert.deepEqual(idOf(`{"uid":${text}}`), { ok: true, id }, text);
    }
    assert.equal(canonicalJsonNumber('1e400'), `1${'0'.repeat(400)}`);
    for (const text of ['1e2000', '1e-2000', '1e99999999999999999999']) {
      const verdict = idOf(`{"uid":${text}}`);
      assert.equal(!verdict.ok && verdict.reason, 'invalid-id', text);
      assert.match(!verdict.ok ? verdict.detail : '', /exceeds 1024 bytes/);
    }
  });

  it('an id string that is not valid UTF-8 is an invalid id, never replaced', () => {
    const bytes = (tail: number[]) =>
      Buffer.concat([Buffer.from('{"uid":"user-'), Buffer.from(tail), Buffer.from('"}')]);
    for (const tail of [[0xff], [0xfe], [0xe2], [0xc3, 0x28], [0xed, 0xa0, 0x80]]) {
      const verdict = idOf(bytes(tail));
      assert.deepEqual(verdict, {
        ok: false,
        reason: 'invalid-id',
        detail: 'id field "uid" is not valid UTF-8',
      });
    }
    const escaped = idOf(Buffer.concat([Buffer.from('{"uid":"\\n'), Buffer.from([0xff]), Buffer.from('"}')]));
    assert.equal(!escaped.ok && escaped.reason, 'invalid-id');
    // Bytes elsewhere in the value are the producer's business; the id is still read.
    const elsewhere = Buffer.concat([
      Buffer.from('{"name":"'),
      Buffer.from([0xff]),
      Buffer.from('","uid":"a"}'),
    ]);
    assert.deepEqual(idOf(elsewhere), { ok: true, id: 'a' });
    // A key whose bytes are not UTF-8 is not a path step that reads as U+FFFD.
    const key = Buffer.concat([Buffer.from('{"meta":{"'), Buffer.from([0xff]), Buffer.from('":"a"}}')]);
    assert.deepEqual(messageIdReader({ from: 'value', path: 'meta.\uFFFD' })({ value: key }), {
      ok: true,
      id: undefined,
    });
  });

  it('skips values of any depth off the path without running out of stack', () => {
    const deep = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
    assert.deepEqual(idOf(`{"x":${deep},"uid":"a"}`), { ok: true, id: 'a' });
    assert.deepEqual(idOf(`{"uid":${deep}}`).ok, false);
    assert.equal(idOf('{'.repeat(100_000)).ok, false);
  });

  it('agrees with JSON.parse on hand-picked edge cases', () => {
    const cases = [
      '{"uid":"a"}',
      '{"uid":""}',
      '{"uid":12}',
      '{"uid":-0}',
      '{"uid":1.50}',
      '{"uid":true}',
      '{"uid":{"a":1}}',
      '{"uid":[1]}',
      '{"uid":"a","uid":"b"}',
      '{"uid":"a","uid":null}',
      '{"u\\u0069d":"escaped key"}',
      '{"uid":"caf\\u00e9 \\"q\\" \\n"}',
      '{"uid":"\\ud800"}',
      `{"uid":"${'x'.repeat(1025)}"}`,
      '{"uid":"日本"}',
      '\uFEFF{"uid":"bom"}',
      '  {"uid" : "spaced" }  ',
      '{"uid":"a",}',
      '{"uid":01}',
      '{"uid":"tab\there"}',
      '[{"uid":"in array"}]',
      '"just a string"',
      '42',
      '',
      'null',
      '{"meta":{"id":"m"},"uid":"u"}',
      '{"items":[{"id":"a"},{"id":"b"}]}',
      '{"items":[{"id":"a"}]}',
      '{"items":{"1":{"id":"object, not array"}}}',
    ];
    for (const text of cases) {
      agree(uid, Buffer.from(text));
      agree(nested, Buffer.from(text));
      agree(indexed, Buffer.from(text));
    }
    agree(nested, Buffer.from('{"meta":{"id":"a"},"meta":{"other":1}}'));
    agree(nested, Buffer.from('{"meta":[{"id":"a"}]}'));
    agree(nested, Buffer.from('{"meta":5}'));
    agree(uid, null);
  });

  it('agrees with JSON.parse on generated JSON with the field anywhere', () => {
    const id = fc.oneof(
      fc.string(),
      fc.string({ unit: 'grapheme' }),
      fc.string({ unit: 'binary' }),
      fc.integer(),
      fc.double(),
      fc.constant(null),
      fc.jsonValue(),
    );
    const doc = fc.record(
      {
        uid: id,
        meta: fc.oneof(fc.record({ id }, { requiredKeys: [] }), fc.jsonValue()),
        items: fc.oneof(fc.array(fc.record({ id }, { requiredKeys: [] })), fc.jsonValue()),
        other: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(doc, fc.boolean(), (value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined);
        agree(uid, Buffer.from(text));
        agree(nested, Buffer.from(text));
        agree(indexed, Buffer.from(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it('agrees with JSON.parse on damaged JSON and arbitrary text', () => {
    const damaged = fc
      .tuple(fc.jsonValue(), fc.nat(), fc.nat(), fc.string({ maxLength: 3 }))
      .map(([value, at, cut, insert]) => {
        const text = JSON.stringify({ uid: 'x', value });
        const p = at % (text.length + 1);
        return text.slice(0, p) + insert + text.slice(Math.min(text.length, p + (cut % 3)));
      });
    fc.assert(
      fc.property(damaged, (text) => agree(uid, Buffer.from(text))),
      { numRuns: 3_000 },
    );
    const jsonish = fc
      .array(fc.constantFrom(...'{}[]":,\\ \n0123456789.eE+-tfnrulsaiduid'.split('')), { maxLength: 40 })
      .map((chars) => chars.join(''));
    fc.assert(
      fc.property(jsonish, (text) => agree(uid, Buffer.from(text))),
      { numRuns: 3_000 },
    );
  });
});
