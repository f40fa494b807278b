import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compileId } from '../../src/cli/id.js';
import { parseLines } from '../../src/cli/parse.js';

const idOf = compileId('id');

function linesOf(text: string, final = false) {
  const data = Buffer.from(text, 'utf8');
  const parsed = parseLines(data, idOf, final);
  const lines = Array.from(parsed.starts, (start, i) => data.toString('utf8', start, parsed.ends[i]));
  return { ...parsed, lines };
}

describe('parseLines', () => {
  test('byte and text offsets stay in step across multi-byte characters', () => {
    const { lines, ids, consumed } = linesOf('{"id":"é☕𝄞"}\n{"id":"b","t":"ü"}\n{"id":"c"');
    assert.deepEqual(lines, ['{"id":"é☕𝄞"}', '{"id":"b","t":"ü"}']);
    assert.deepEqual(ids, ['é☕𝄞', 'b']);
    assert.equal(consumed, Buffer.byteLength('{"id":"é☕𝄞"}\n{"id":"b","t":"ü"}\n'));
  });

  test('with final, a last line without newline counts', () => {
    const { lines, ids } = linesOf('{"id":1}\n{"id":2}', true);
    assert.deepEqual(lines, ['{"id":1}', '{"id":2}']);
    assert.deepEqual(ids, ['1', '2']);
  });

  test('keeps a trailing \\r in the line bytes and still parses it', () => {
    const { lines, ids } = linesOf('{"id":"a"}\r\n');
    assert.deepEqual(lines, ['{"id":"a"}\r']);
    assert.deepEqual(ids, ['a']);
  });

  test('reports why a line is invalid, by index', () => {
    const { ids, invalid } = linesOf('nope\n\n{"x":1}\n{"id":[1]}\n{"id":"ok"}\n');
    assert.deepEqual(ids, [undefined, undefined, undefined, undefined, 'ok']);
    assert.deepEqual(
      invalid.map(([i, reason]) => [i, reason.split(' (')[0]]),
      [
        [0, 'invalid JSON'],
        [1, 'empty line'],
        [2, 'no id at id'],
        [3, 'id must be a string, number or bytes, got array'],
      ],
    );
  });

  test('invalid UTF-8 is kept byte for byte', () => {
    const data = Buffer.concat([Buffer.from('{"id":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}\n')]);
    const parsed = parseLines(data, idOf);
    assert.equal(parsed.ends[0], data.length - 1);
    assert.deepEqual(data.subarray(parsed.starts[0], parsed.ends[0]), data.subarray(0, data.length - 1));
  });
});

describe('compileId', () => {
  test('a composite id is the JSON array of its parts', () => {
    const composite = compileId('user.id, type');
    assert.deepEqual(composite({ user: { id: 7 }, type: 'a,b' }), { id: '["7","a,b"]' });
    assert.deepEqual(composite({ user: { id: 7 } }), { reason: 'no id at type' });
  });

  test('rejects empty path steps', () => {
    assert.throws(() => compileId('a..b'), /bad --id/);
    assert.throws(() => compileId('a,'), /bad --id/);
  });
});
