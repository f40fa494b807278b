import type { IdOutcome } from './id.js';

/** The lines found in one piece of input, as parallel arrays (no object per line), and the bytes they index. */
export interface SplitPiece {
  readonly data: Uint8Array;
  /** Byte offsets of each line in the piece, newline excluded. */
  readonly starts: Int32Array;
  readonly ends: Int32Array;
  /** The id of each line; undefined for an invalid line. */
  readonly ids: (string | undefined)[];
  /**
   * Why each invalid line is invalid. An over-long line's adds its length, newline included: its bytes are
   * not in the piece (an empty range stands for them), so it is reported and skipped, never written.
   */
  readonly invalid: [index: number, reason: string, droppedBytes?: number][];
}

const NEWLINE = 0x0a;
const BOM = [0xef, 0xbb, 0xbf];

/**
 * Splits `data` (whole lines only, the last one with or without its newline) into lines and finds each line's
 * id from its bytes. A line longer than `maxLineBytes` is invalid, and its bytes are dropped.
 */
export function parseLines(
  data: Uint8Array,
  idOf: (line: Uint8Array) => IdOutcome,
  maxLineBytes = Number.POSITIVE_INFINITY,
): SplitPiece {
  const buffer = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  // One pass for the line ends (into a scratch array reused across calls), then exact-size arrays.
  let count = 0;
  let scratch = lineEnds;
  for (let at = buffer.indexOf(NEWLINE); at !== -1; at = buffer.indexOf(NEWLINE, at + 1)) {
    if (count === scratch.length) {
      const grown = new Int32Array(scratch.length * 2);
      grown.set(scratch);
      lineEnds = scratch = grown;
    }
    scratch[count++] = at;
  }
  const unterminated = buffer.length > 0 && buffer[buffer.length - 1] !== NEWLINE;
  const total = unterminated ? count + 1 : count;
  const starts = new Int32Array(total);
  const ends = new Int32Array(total);
  const ids: (string | undefined)[] = new Array(total);
  const invalid: SplitPiece['invalid'] = [];
  const base = buffer.byteOffset;
  let start = 0;
  for (let i = 0; i < total; i++) {
    const end = i < count ? (scratch[i] as number) : buffer.length;
    starts[i] = start;
    ends[i] = end;
    if (end - start > maxLineBytes) {
      ids[i] = undefined;
      invalid.push([i, tooLong(end - start, maxLineBytes), end - start + 1]);
      ends[i] = start;
    } else {
      // A plain view, not a Buffer: cheaper to make, and the id reader only indexes bytes.
      const outcome = idOf(new Uint8Array(buffer.buffer, base + start, end - start));
      if ('id' in outcome) ids[i] = outcome.id;
      else {
        ids[i] = undefined;
        invalid.push([i, outcome.reason]);
      }
    }
    start = end + 1;
  }
  return { data, starts, ends, ids, invalid };
}

/** Newline positions of the piece being parsed (grown as needed, never shrunk). */
let lineEnds = new Int32Array(4096);

function tooLong(bytes: number, max: number): string {
  return `line is ${bytes} bytes, longer than --max-line-bytes ${max}; its bytes are not kept`;
}

/**
 * Turns one source's chunks into pieces of whole lines without copying the chunks: a chunk's whole lines are
 * parsed where they lie. Only the line cut by a chunk's end is copied, as parts joined once its newline
 * arrives. A line that grows past `maxLineBytes` is counted and skipped, and comes out as one invalid,
 * dropped line. A UTF-8 byte-order mark at the start of a source is removed.
 */
export class LineSplitter {
  #pending: Uint8Array[] = [];
  /** Bytes of the unfinished line so far, kept or skipped. */
  #lineBytes = 0;
  /** The unfinished line is over-long: its bytes are no longer kept. */
  #skipping = false;
  /** No byte of the current source has been looked at for a byte-order mark yet. */
  #atStart = true;

  constructor(
    private readonly idOf: (line: Uint8Array) => IdOutcome,
    private readonly maxLineBytes: number,
  ) {}

  /**
   * The whole lines completed by `chunk`, in order: the line the previous chunk left unfinished (a piece of its
   * own), then the chunk's own whole lines, which refer to `chunk`'s bytes. No reference to `chunk` is kept.
   */
  push(chunk: Uint8Array): SplitPiece[] {
    let data = chunk;
    if (this.#atStart) {
      const head = this.#pending.length === 0 ? data : joinExact([...this.#pending, data]);
      if (head.length < BOM.length && startsLikeBom(head)) {
        this.#pending = [head === chunk ? new Uint8Array(head) : head];
        this.#lineBytes = head.length;
        return [];
      }
      this.#atStart = false;
      this.#startLine();
      data = head.length >= BOM.length && startsLikeBom(head) ? head.subarray(BOM.length) : head;
    }
    const buffer = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const first = buffer.indexOf(NEWLINE);
    if (first === -1) {
      this.#grow(buffer);
      return [];
    }
    const last = buffer.lastIndexOf(NEWLINE);
    const pieces: SplitPiece[] = [];
    let from = 0;
    if (this.#skipping || this.#lineBytes + first > this.maxLineBytes) {
      pieces.push(this.#dropped(this.#lineBytes + first));
      from = first + 1;
    } else if (this.#pending.length > 0) {
      const line = joinExact([...this.#pending, buffer.subarray(0, first + 1)]);
      pieces.push(this.#parse(line));
      from = first + 1;
    }
    if (from <= last) pieces.push(this.#parse(buffer.subarray(from, last + 1)));
    this.#startLine();
    if (last + 1 < buffer.length) this.#grow(buffer.subarray(last + 1));
    return pieces;
  }

  /** The end of the source: its last line counts without a newline, unless reading was aborted. */
  end(aborted: boolean): SplitPiece[] {
    let pieces: SplitPiece[] = [];
    if (!aborted && this.#lineBytes > 0) {
      pieces = [this.#skipping ? this.#dropped(this.#lineBytes) : this.#parse(joinExact(this.#pending))];
    }
    this.#startLine();
    this.#atStart = true;
    return pieces;
  }

  #startLine(): void {
    this.#pending = [];
    this.#lineBytes = 0;
    this.#skipping = false;
  }

  #parse(lines: Uint8Array): SplitPiece {
    return parseLines(lines, this.idOf, this.maxLineBytes);
  }

  /** Keeps a copy of the unfinished line's next bytes (the chunk they are in goes back to its pool). */
  #grow(bytes: Uint8Array): void {
    this.#lineBytes += bytes.length;
    if (this.#skipping) return;
    if (this.#lineBytes > this.maxLineBytes) {
      this.#skipping = true;
      this.#pending = [];
    } else this.#pending.push(new Uint8Array(bytes));
  }

  /** An over-long line of `bytes` bytes (newline excluded), whose bytes were not kept. */
  #dropped(bytes: number): SplitPiece {
    return {
      data: new Uint8Array(0),
      starts: new Int32Array(1),
      ends: new Int32Array(1),
      ids: [undefined],
      invalid: [[0, tooLong(bytes, this.maxLineBytes), bytes + 1]],
    };
  }
}

/** The bytes agree with a byte-order mark as far as they go. */
function startsLikeBom(bytes: Uint8Array): boolean {
  for (let k = 0; k < Math.min(bytes.length, BOM.length); k++) if (bytes[k] !== BOM[k]) return false;
  return true;
}

/** The parts joined into one exact-size buffer of its own (so it can be transferred), copied once. */
function joinExact(parts: readonly Uint8Array[]): Uint8Array {
  let size = 0;
  for (const part of parts) size += part.length;
  const out = new Uint8Array(size);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** What the parse worker starts with: the `--id` expression, compiled there, and the longest line kept. */
export interface WorkerData {
  readonly idExpression: string;
  readonly maxLineBytes: number;
}

/** Main thread to parse worker: input chunks in order, then the end of each source. */
export type ToWorker =
  | { readonly kind: 'chunk'; readonly data: Uint8Array }
  | { readonly kind: 'end'; readonly aborted: boolean };

/**
 * Parse worker to main thread: one reply per message, in order; `chunk` is the chunk's buffer, moved back.
 */
export interface ParsedPiece {
  readonly pieces: readonly SplitPiece[];
  readonly chunk: ArrayBuffer | undefined;
}
