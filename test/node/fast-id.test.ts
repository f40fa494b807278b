import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { type IdSource, messageIdReader } from '../../src/adapters/kafka/message-id.js';
import { ABSENT, jsonFieldScanner, nodeIdReader } from '../../src/node/fast-id.js';

/** The node's reader must give exactly the adapter's verdict for any value. */
function agree(source: IdSource, value: Buffer | null): void {
  const expected = messageIdReader(source)({ value });
  const actual = nodeIdReader(source)({ value });
  assert.deepEqual(actual, expected, `value ${JSON.stringify(value?.toString('latin1'))}`);
}

const uid: IdSource = { from: 'value', path: 'uid' };
const nested: IdSource = { from: 'value', path: 'meta.id' };

describe('node id reader (JSON byte scanner)', () => {
  it('reads the common shapes without JSON.parse', () => {
    const scan = jsonFieldScanner(['uid']);
    const span = scan(Buffer.from('{"n":1,"uid":"u-7","x":[1,{"uid":2}]}'));
    assert.ok(span !== undefined && span !== ABSENT);
    assert.equal(span.kind, 'string');
    assert.equal(scan(Buffer.from('{"n":1}')), ABSENT);
    assert.equal(scan(Buffer.from('{"uid":null}')), ABSENT);
    assert.equal(scan(Buffer.from('{"uid":"x"')), undefined, 'truncated: the adapter decides');
  });

  it('agrees with the adapter on hand-picked edge cases', () => {
    const cases = [
      '{"uid":"a"}',
      '{"uid":""}',
      '{"uid":12}',
      '{"uid":-0}',
      '{"uid":1e400}',
      '{"uid":1.50}',
      '{"uid":12345678901234567890}',
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
    ];
    for (const text of cases) {
      agree(uid, Buffer.from(text));
      agree(nested, Buffer.from(text));
    }
    agree(nested, Buffer.from('{"meta":{"id":"a"},"meta":{"other":1}}'));
    agree(nested, Buffer.from('{"meta":[{"id":"a"}]}'));
    agree(nested, Buffer.from('{"meta":5}'));
    agree(uid, null);
    agree(uid, Buffer.from([0x7b, 0x22, 0x75, 0x69, 0x64, 0x22, 0x3a, 0x22, 0xe2, 0x22, 0x7d])); // bad UTF-8 in the id
    agree(uid, Buffer.from('{'.repeat(100_000)));
  });

  it('agrees with the adapter on generated JSON with the field anywhere', () => {
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
        other: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(doc, fc.boolean(), (value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined);
        agree(uid, Buffer.from(text));
        agree(nested, Buffer.from(text));
      }),
      { numRuns: 2_000 },
    );
  });

  it('agrees with the adapter on damaged JSON and arbitrary bytes', () => {
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
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => agree(uid, Buffer.from(bytes))),
      { numRuns: 2_000 },
    );
  });
});
