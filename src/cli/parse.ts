import type { IdOutcome } from './id.js';

/** The lines found in one piece of input, as parallel arrays (no object per line). */
export interface ParsedLines {
  /** Byte offsets of each line in the piece, newline excluded. */
  readonly starts: Int32Array;
  readonly ends: Int32Array;
  /** The id of each line; undefined for an invalid line. */
  readonly ids: (string | undefined)[];
  /** Why each invalid line is invalid, as `[index, reason]` pairs. */
  readonly invalid: [number, string][];
  /** Bytes up to and including the last newline; the rest belongs to the next piece. */
  readonly consumed: number;
}

const NEWLINE = 0x0a;

/**
 * Splits `data` into whole lines and finds each line's id. Decoding up to a newline never splits a character,
 * and the k-th newline byte is the k-th '\n' character, so byte and text offsets advance in step: one decode
 * per piece, not per line. With `final`, a last line without a newline counts too.
 */
export function parseLines(
  data: Uint8Array,
  idOf: (value: unknown) => IdOutcome,
  final = false,
): ParsedLines {
  const buffer = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const lastNewline = buffer.lastIndexOf(NEWLINE);
  const consumed = final ? buffer.length : lastNewline + 1;
  let count = 0;
  for (let at = buffer.indexOf(NEWLINE); at !== -1 && at < consumed; at = buffer.indexOf(NEWLINE, at + 1))
    count++;
  if (consumed > lastNewline + 1) count++;
  const starts = new Int32Array(count);
  const ends = new Int32Array(count);
  const ids: (string | undefined)[] = [];
  const invalid: [number, string][] = [];
  const text = buffer.toString('utf8', 0, consumed);
  let byteStart = 0;
  let textStart = 0;
  for (let i = 0; i < count; i++) {
    let byteEnd = buffer.indexOf(NEWLINE, byteStart);
    let textEnd = text.indexOf('\n', textStart);
    if (byteEnd === -1 || byteEnd >= consumed) {
      byteEnd = consumed;
      textEnd = text.length;
    }
    starts[i] = byteStart;
    ends[i] = byteEnd;
    const outcome = lineId(text.slice(textStart, textEnd), idOf);
    if ('id' in outcome) ids.push(outcome.id);
    else {
      ids.push(undefined);
      invalid.push([i, outcome.reason]);
    }
    byteStart = byteEnd + 1;
    textStart = textEnd + 1;
  }
  return { starts, ends, ids, invalid, consumed };
}

/** The id of one line, or why it has none (bad JSON, empty line, missing or unusable id). */
export function lineId(text: string, idOf: (value: unknown) => IdOutcome): IdOutcome {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    if (text.trim() === '') return { reason: 'empty line' };
    return { reason: `invalid JSON (${(error as Error).message})` };
  }
  return idOf(value);
}
