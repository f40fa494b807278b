import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { idSourceSchema, messageIdOf, messageIdReader } from '../../../src/kafka/index.js';
import { toKey } from '../../../src/store/ids.js';

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

describe('kafka message id', () => {
  it('reads the key as text, or as bytes when it is not UTF-8; an empty or null key is no id', () => {
    const read = messageIdReader({ from: 'key' });
    assert.deepEqual(read({ key: Buffer.from('order-1'), value: null }), { ok: true, id: 'order-1' });
    const binary = Buffer.from([0xff, 0x00, 0xfe]);
    assert.deepEqual(read({ key: binary, value: null }), { ok: true, id: toKey(binary) });
    assert.deepEqual(read({ key: Buffer.alloc(0), value: null }), { ok: true, id: undefined });
    assert.deepEqual(read({ key: null, value: null }), { ok: true, id: undefined });
  });

  it('reads a header, the last value when repeated, string or bytes', () => {
    const read = messageIdReader({ from: 'header', name: 'event-id' });
    assert.deepEqual(read({ value: null, headers: { 'event-id': Buffer.from('e1') } }), {
      ok: true,
      id: 'e1',
    });
    assert.deepEqual(read({ value: null, headers: { 'event-id': ['a', Buffer.from('b')] } }), {
      ok: true,
      id: 'b',
    });
    assert.deepEqual(read({ value: null, headers: { other: 'x' } }), { ok: true, id: undefined });
    assert.deepEqual(read({ value: null }), { ok: true, id: undefined });
  });

  it('reads a dotted path into the JSON value: strings and numbers; null or missing is no id', () => {
    const read = messageIdReader({ from: 'value', path: 'meta.id' });
    assert.deepEqual(read({ value: json({ meta: { id: 'x' } }) }), { ok: true, id: 'x' });
    assert.deepEqual(read({ value: json({ meta: { id: 42 } }) }), { ok: true, id: '42' });
    assert.deepEqual(read({ value: json({ meta: { id: null } }) }), { ok: true, id: undefined });
    assert.deepEqual(read({ value: json({ meta: {} }) }), { ok: true, id: undefined });
    assert.deepEqual(read({ value: json({ meta: { id: '' } }) }), { ok: true, id: undefined });
    assert.deepEqual(read({ value: json('just a string') }), { ok: true, id: undefined });
    assert.deepEqual(read({ value: null }), { ok: true, id: undefined }, 'a tombstone has no id');
  });

  it('reports a value that is not JSON, and ids of the wrong type or size, without throwing', () => {
    const read = messageIdReader({ from: 'value', path: 'id' });
    const bad = read({ value: Buffer.from('{not json') });
    assert.equal(bad.ok, false);
    assert.equal(!bad.ok && bad.reason, 'invalid-json');
    assert.match(!bad.ok ? bad.detail : '', /not valid JSON/);
    assert.equal(messageIdOf({ value: Buffer.alloc(0) }, { from: 'value', path: 'id' }).ok, false);
    for (const id of [{ a: 1 }, [1], true, 'x'.repeat(2000)]) {
      const verdict = read({ value: json({ id }) });
      assert.equal(!verdict.ok && verdict.reason, 'invalid-id', JSON.stringify(id).slice(0, 20));
    }
    const long = messageIdOf({ key: Buffer.alloc(2000, 'k'), value: null }, { from: 'key' });
    assert.equal(!long.ok && long.reason, 'invalid-id');
  });

  it('validates the config form', () => {
    assert.deepEqual(idSourceSchema.parse({ from: 'value', path: 'a.b' }), { from: 'value', path: 'a.b' });
    assert.equal(idSourceSchema.safeParse({ from: 'value', path: 'a..b' }).success, false);
    assert.equal(idSourceSchema.safeParse({ from: 'header' }).success, false);
    assert.equal(idSourceSchema.safeParse({ from: 'key', path: 'x' }).success, false);
  });
});
