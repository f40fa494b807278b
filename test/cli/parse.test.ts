import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { compileId } from '../../src/cli/id.js';
import { LineSplitter, parseLines, type SplitPiece } from '../../src/cli/parse.js';

const idOf = compileId('id');
const json = (value: unknown) => Buffer.from(JSON.stringify(value));

function linesOf(text: string) {
  const data = Buffer.from(text, 'utf8');
  const parsed = parseLines(data, idOf);
  const lines = Array.from(parsed.starts, (start, i) => data.toString('utf8', start, parsed.ends[i]));
  return { ...parsed, lines };
}

/** Every line a splitter gives for `chunks` then the end of the source: its text (or null when dropped), id and reason. */
function split(chunks: readonly (string | Buffer)[], maxLineBytes = 1 << 20) {
  const splitter = new LineSplitter(idOf, maxLineBytes);
  const pieces: SplitPiece[] = chunks.flatMap((chunk) => splitter.push(Buffer.from(chunk)));
  pieces.push(...splitter.end(false));
  return pieces.flatMap((piece) =>
    Array.from(piece.starts, (start, i) => {
      const dropped = piece.invalid.find(([index]) => index === i)?.[2];
      return {
        text: dropped !== undefined ? null : Buffer.from(piece.data).toString('utf8', start, piece.ends[i]),
        id: piece.ids[i],
        reason: piece.invalid.find(([index]) => index === i)?.[1],
        bytes: dropped,
      };
    }),
  );
}

describe('parseLines', () => {
  test('splits lines and reads ids from the bytes, across multi-byte characters', () => {
    const { lines, ids } = linesOf('{"id":"é☕𝄞"}\n{"id":"b","t":"ü"}\n{"id":"c"}');
    assert.deepEqual(lines, ['{"id":"é☕𝄞"}', '{"id":"b","t":"ü"}', '{"id":"c"}']);
    assert.deepEqual(ids, ['é☕𝄞', 'b', 'c']);
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
        [3, 'id field "id" must be a string or a number, got an array'],
      ],
    );
  });

  test('integers above 2^53 are two ids, not one (9007199254740993 vs ...992)', () => {
    const { ids } = linesOf('{"id":9007199254740993}\n{"id":9007199254740992}\n{"id":1.0}\n{"id":1}\n');
    assert.deepEqual(ids, ['9007199254740993', '9007199254740992', '1', '1']);
  });

  test('an id that is not valid UTF-8 makes the line invalid, and its bytes stay as read', () => {
    const line = (byte: number) =>
      Buffer.concat([Buffer.from('{"id":"user-'), Buffer.from([byte]), Buffer.from('"}\n')]);
    const data = Buffer.concat([line(0xff), line(0xfe)]);
    const parsed = parseLines(data, idOf);
    assert.deepEqual(parsed.ids, [undefined, undefined]);
    assert.deepEqual(
      parsed.invalid.map(([, reason]) => reason),
      ['id field "id" is not valid UTF-8', 'id field "id" is not valid UTF-8'],
    );
    assert.deepEqual(data.subarray(parsed.starts[0], parsed.ends[0]), line(0xff).subarray(0, -1));
  });
});

describe('LineSplitter', () => {
  test('joins a line split across chunks, and a last line without newline counts', () => {
    const lines = split(['{"id":', '"a"}\n{"i', 'd":"b"}\n{"id":"c"}']);
    assert.deepEqual(
      lines.map((l) => [l.text, l.id]),
      [
        ['{"id":"a"}', 'a'],
        ['{"id":"b"}', 'b'],
        ['{"id":"c"}', 'c'],
      ],
    );
  });

  test('a line of a few MB over the maximum is one invalid line, and its bytes are not kept', () => {
    const long = json({ id: 'long', pad: 'x'.repeat(3_000_000) });
    const chunks: Buffer[] = [];
    const all = Buffer.concat([
      json({ id: 'a' }),
      Buffer.from('\n'),
      long,
      Buffer.from('\n'),
      json({ id: 'b' }),
    ]);
    for (let at = 0; at < all.length; at += 65_536) chunks.push(all.subarray(at, at + 65_536));
    const lines = split(chunks, 1_000_000);
    assert.deepEqual(
      lines.map((l) => [l.text, l.id, l.reason, l.bytes]),
      [
        ['{"id":"a"}', 'a', undefined, undefined],
        [
          null,
          undefined,
          `line is ${long.length} bytes, longer than --max-line-bytes 1000000; its bytes are not kept`,
          long.length + 1,
        ],
        ['{"id":"b"}', 'b', undefined, undefined],
      ],
    );
  });

  test('an over-long last line without newline, and over-long lines inside one chunk', () => {
    const long = `{"id":"${'y'.repeat(500)}"}`;
    const atEof = split(['{"id":1}\n', long.slice(0, 200), long.slice(200)], 100);
    assert.deepEqual(
      atEof.map((l) => [l.text, l.reason?.split(',')[0]]),
      [
        ['{"id":1}', undefined],
        [null, `line is ${long.length} bytes`],
      ],
    );
    const inside = split([`{"id":1}\n${long}\n{"id":2}\n`], 100);
    assert.deepEqual(
      inside.map((l) => [l.text, l.id]),
      [
        ['{"id":1}', '1'],
        [null, undefined],
        ['{"id":2}', '2'],
      ],
    );
  });

  test('a byte-order mark at the start of a source is not part of line 1, even split across chunks', () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    const whole = split([Buffer.concat([bom, Buffer.from('{"id":"a"}\n')])]);
    assert.deepEqual(
      whole.map((l) => [l.text, l.id]),
      [['{"id":"a"}', 'a']],
    );
    const torn = split([
      bom.subarray(0, 1),
      bom.subarray(1, 2),
      Buffer.concat([bom.subarray(2), json({ id: 'b' })]),
    ]);
    assert.deepEqual(
      torn.map((l) => [l.text, l.id]),
      [['{"id":"b"}', 'b']],
    );
    // Only at the start: a BOM later in the source is ordinary (invalid) text.
    const later = split([Buffer.concat([Buffer.from('{"id":"a"}\n'), bom, Buffer.from('{"id":"c"}\n')])]);
    assert.equal(later[1]?.id, undefined);
    // Each source starts again.
    const splitter = new LineSplitter(idOf, 100);
    splitter.push(Buffer.from('{"id":1}'));
    splitter.end(false);
    const second = splitter.push(Buffer.concat([bom, Buffer.from('{"id":2}\n')]));
    assert.deepEqual(
      second.flatMap((piece) => piece.ids),
      ['2'],
    );
  });

  test('after an abort the cut-short last line does not count', () => {
    const splitter = new LineSplitter(idOf, 100);
    assert.deepEqual(
      splitter.push(Buffer.from('{"id":1}\n{"id":')).flatMap((piece) => piece.ids),
      ['1'],
    );
    assert.deepEqual(splitter.end(true), []);
  });

  test('keeps no reference to a chunk: the reader may read into it again once its whole lines are done', () => {
    const splitter = new LineSplitter(idOf, 100);
    const chunk = Buffer.from('{"id":1}\n{"id":"a');
    const first = splitter.push(chunk);
    assert.deepEqual(
      first.flatMap((piece) => piece.ids),
      ['1'],
    );
    chunk.fill(0x78); // the pool reuses the buffer for the next read
    const second = splitter.push(Buffer.from('b"}\n{"id":2}\n'));
    assert.deepEqual(
      second.map((piece) => [Buffer.from(piece.data).toString(), piece.ids]),
      [
        ['{"id":"ab"}\n', ['ab']],
        ['{"id":2}\n', ['2']],
      ],
    );
  });
});

describe('compileId', () => {
  test('a composite id is the JSON array of its parts', () => {
    const composite = compileId('user.id, type');
    assert.deepEqual(composite(json({ user: { id: 7 }, type: 'a,b' })), { id: '["7","a,b"]' });
    assert.deepEqual(composite(json({ user: { id: 7 } })), { reason: 'no id at type' });
  });

  test('rejects empty path steps', () => {
    assert.throws(() => compileId('a..b'), /bad --id/);
    assert.throws(() => compileId('a,'), /bad --id/);
  });
});
