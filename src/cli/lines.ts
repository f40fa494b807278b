import { createReadStream } from 'node:fs';
import { addAbortSignal, type Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { ParsedPiece, ToWorker } from './worker-protocol.js';

/**
 * A batch of parsed input lines. The lines are not copied out one by one: the batch refers to runs of lines of
 * the parsed pieces (a batch of 2,000 lines usually spans one or two pieces), and only the ids are gathered
 * into one array, which is what the store is asked about. A line's bytes are exactly as read (the newline
 * excluded), so writing them back reproduces the input.
 */
export class LineBatch {
  /** The line's id; undefined for an invalid line. */
  readonly ids: (string | undefined)[] = [];
  /** Input bytes of the batch's lines, newlines included (for the progress bar). */
  bytes = 0;
  readonly #runs: Run[] = [];
  /** Why an invalid line is invalid, by index (invalid lines are few). */
  readonly #reasons = new Map<number, string>();
  /** Over-long lines (index → their byte length): reported and skipped, never written, as their bytes were not kept. */
  readonly #dropped = new Map<number, number>();

  get length(): number {
    return this.ids.length;
  }

  /** Adds lines `from` to `to` (exclusive) of a parsed piece: line `from` is line `line` (1-based) of `source`. */
  add(
    piece: { readonly data: Buffer; readonly starts: Int32Array; readonly ends: Int32Array },
    ids: readonly (string | undefined)[],
    from: number,
    to: number,
    source: string,
    line: number,
  ): void {
    const first = this.ids.length;
    const run: Run = { ...piece, from, first, count: to - from, source, line };
    this.#runs.push(run);
    const { starts, ends } = piece;
    let bytes = 0;
    for (let k = from; k < to; k++) {
      this.ids.push(ids[k]);
      bytes += (ends[k] as number) - (starts[k] as number) + 1;
    }
    this.bytes += bytes;
  }

  /** Marks line `i` invalid, for `reason`. */
  setInvalid(i: number, reason: string): void {
    this.#reasons.set(i, reason);
  }

  /** Marks line `i` over-long: `bytes` long with its newline, none of them kept. */
  setDropped(i: number, bytes: number): void {
    this.#dropped.set(i, bytes);
    this.bytes += bytes - 1; // `add` counted its empty range as one byte
  }

  /** Why line `i` has no id (undefined for a line with an id). */
  reason(i: number): string | undefined {
    return this.#reasons.get(i);
  }

  /** `file:line` of line `i`, for messages. */
  location(i: number): string {
    const run = this.#runOf(i);
    return `${run.source}:${run.line + i - run.first}`;
  }

  /** Byte length of line `i` plus its newline (as read, for a dropped line). */
  size(i: number): number {
    const dropped = this.#dropped.get(i);
    if (dropped !== undefined) return dropped;
    const run = this.#runOf(i);
    const k = run.from + i - run.first;
    return (run.ends[k] as number) - (run.starts[k] as number) + 1;
  }

  /** Input bytes of lines 0 to `i`, newlines included. */
  bytesThrough(i: number): number {
    let bytes = 0;
    for (let j = 0; j <= i; j++) bytes += this.size(j);
    return bytes;
  }

  /** Whether line `i`'s bytes are here to be written (an over-long line's are not). */
  kept(i: number): boolean {
    return !this.#dropped.has(i);
  }

  /**
   * The bytes of lines `indices` (ascending, all kept), each followed by a newline, in one buffer (one write per
   * batch). Neighbouring lines of a piece are copied together with the newline between them, so a batch costs
   * one copy per run of written lines rather than one per line.
   */
  join(indices: readonly number[]): Buffer {
    const n = indices.length;
    let size = 0;
    for (let j = 0; j < n; j++) size += this.size(indices[j] as number);
    const out = Buffer.allocUnsafe(size);
    const runs = this.#runs;
    let r = 0;
    let at = 0;
    let j = 0;
    while (j < n) {
      const i = indices[j] as number;
      while (i >= (runs[r] as Run).first + (runs[r] as Run).count) r++;
      const run = runs[r] as Run;
      const { starts, ends, data } = run;
      const offset = run.from - run.first;
      let k = i + offset;
      const start = starts[k] as number;
      // Extend over the following lines while they are the next lines of the same piece, right after this one.
      const last = run.first + run.count - 1;
      while (
        j + 1 < n &&
        (indices[j + 1] as number) === k - offset + 1 &&
        k - offset + 1 <= last &&
        starts[k + 1] === (ends[k] as number) + 1
      ) {
        k++;
        j++;
      }
      at += data.copy(out, at, start, ends[k]);
      out[at++] = NEWLINE;
      j++;
    }
    return out;
  }

  #runOf(i: number): Run {
    const runs = this.#runs;
    for (let r = runs.length - 1; r > 0; r--) if ((runs[r] as Run).first <= i) return runs[r] as Run;
    return runs[0] as Run;
  }
}

/** Lines `from`… of a parsed piece, as lines `first`… of a batch. */
interface Run {
  readonly data: Buffer;
  readonly starts: Int32Array;
  readonly ends: Int32Array;
  readonly from: number;
  readonly first: number;
  readonly count: number;
  readonly source: string;
  /** Line number of the run's first line in `source`. */
  readonly line: number;
}

/** The name `-` (or no file at all) means standard input. */
export const STDIN = '-';

const NEWLINE = 0x0a;
const CHUNK_BYTES = 1 << 20;
/** Pieces sent to the parse worker and not yet returned: enough to keep both threads busy, little memory. */
const WINDOW = 4;

/** Options of {@link readBatches}. */
export interface ReadOptions {
  /** The `--id` expression, compiled again inside the worker. */
  readonly idExpression: string;
  /** Longer lines are invalid, and their bytes are skipped rather than held. */
  readonly maxLineBytes: number;
  /** Ends reading (a signal while waiting for input); the whole lines read so far still come out. */
  readonly signal?: AbortSignal;
  readonly stdin?: Readable;
}

/**
 * Reads the inputs in order and yields their lines, parsed and with ids, in batches of at most `batchSize`
 * (a batch may span files). Parsing runs in a worker thread, a few pieces ahead of the caller.
 */
export async function* readBatches(
  inputs: readonly string[],
  batchSize: number,
  options: ReadOptions,
): AsyncGenerator<LineBatch> {
  const worker = startWorker({ idExpression: options.idExpression, maxLineBytes: options.maxLineBytes });
  const replies: ParsedPiece[] = [];
  /** The input index of each message sent, in order (a reply answers the oldest). */
  const sent: number[] = [];
  let received = 0;
  let failure: unknown;
  let pumpDone = false;
  let wake: (() => void) | undefined;
  let windowOpen: (() => void) | undefined;
  const stop = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stop.signal]) : stop.signal;

  worker.on('message', (piece: ParsedPiece) => {
    replies.push(piece);
    wake?.();
  });
  worker.on('error', (error) => {
    failure ??= error;
    wake?.();
  });

  const post = (input: number, message: ToWorker, transfer: ArrayBuffer[] = []) => {
    sent.push(input);
    worker.postMessage(message, transfer);
  };
  const pump = async () => {
    for (let input = 0; input < inputs.length && !signal.aborted; input++) {
      const name = inputs[input] as string;
      const stream =
        name === STDIN
          ? (options.stdin ?? process.stdin)
          : createReadStream(name, { highWaterMark: CHUNK_BYTES });
      addAbortSignal(signal, stream);
      let aborted = false;
      try {
        for await (const chunk of stream as AsyncIterable<Buffer>) {
          while (sent.length - received >= WINDOW && !signal.aborted) {
            await new Promise<void>((resolve) => {
              windowOpen = resolve;
            });
          }
          if (signal.aborted) break;
          const data = ownedBytes(chunk);
          post(input, { kind: 'chunk', data }, [data.buffer as ArrayBuffer]);
        }
      } catch (error) {
        if (!signal.aborted) throw error;
      }
      aborted = signal.aborted;
      post(input, { kind: 'end', aborted });
    }
  };
  pump()
    .catch((error: unknown) => {
      failure ??= error;
    })
    .finally(() => {
      pumpDone = true;
      wake?.();
    });

  const lineNumbers = new Array<number>(inputs.length).fill(0);
  let batch = new LineBatch();
  try {
    for (;;) {
      const piece = replies.shift();
      if (piece === undefined) {
        if (failure !== undefined) throw failure;
        if (pumpDone && received === sent.length) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      const input = sent[received++] as number;
      windowOpen?.();
      windowOpen = undefined;
      const source = inputs[input] === STDIN ? '<stdin>' : (inputs[input] as string);
      const lines = {
        data: Buffer.from(piece.data.buffer, piece.data.byteOffset, piece.data.byteLength),
        starts: piece.starts,
        ends: piece.ends,
      };
      const count = piece.ids.length;
      let nextInvalid = 0;
      let nextDropped = 0;
      for (let from = 0; from < count; ) {
        const to = Math.min(count, from + batchSize - batch.length);
        const first = batch.length - from; // batch index of piece line 0, for this run
        batch.add(lines, piece.ids, from, to, source, (lineNumbers[input] as number) + 1);
        lineNumbers[input] = (lineNumbers[input] as number) + (to - from);
        for (; nextInvalid < piece.invalid.length; nextInvalid++) {
          const [index, reason] = piece.invalid[nextInvalid] as [number, string];
          if (index >= to) break;
          batch.setInvalid(first + index, reason);
        }
        for (; nextDropped < piece.dropped.length; nextDropped++) {
          const [index, bytes] = piece.dropped[nextDropped] as [number, number];
          if (index >= to) break;
          batch.setDropped(first + index, bytes);
        }
        from = to;
        if (batch.length >= batchSize) {
          yield batch;
          batch = new LineBatch();
        }
      }
    }
    if (failure !== undefined) throw failure;
    if (batch.length > 0) yield batch;
  } finally {
    stop.abort();
    windowOpen?.();
    await worker.terminate();
  }
}

/**
 * The chunk's bytes in an ArrayBuffer of their own, so they can be moved to the worker rather than cloned. A file
 * stream reads each chunk into a fresh buffer of exactly its size, which is moved as it is; a chunk that shares
 * its buffer (stdin's pooled reads) is copied.
 */
function ownedBytes(chunk: Buffer): Uint8Array {
  const whole = chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength;
  return whole && !(chunk.buffer instanceof SharedArrayBuffer)
    ? new Uint8Array(chunk.buffer, 0, chunk.byteLength)
    : new Uint8Array(chunk);
}

/**
 * The parse worker's V8 young generation, MiB. Its garbage is per line and dies young, so a small nursery
 * suffices, while V8's default (sized for a main thread) held ~50 MB more RSS for nothing. Measured (1M lines):
 * 4 MiB saved another ~12 MB but tripled the worker's GC time; 12 MiB kept the run as fast as the default.
 */
const WORKER_YOUNG_GENERATION_MB = 12;

function startWorker(workerData: { idExpression: string; maxLineBytes: number }): Worker {
  const resourceLimits = { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB };
  if (!import.meta.url.endsWith('.ts'))
    return new Worker(new URL('./parse-worker.js', import.meta.url), { workerData, resourceLimits });
  // Running from source (tsx): the worker is TypeScript too, and workers do not inherit tsx's loader, so a
  // small bootstrap registers it first.
  const api = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const entry = JSON.stringify(new URL('./parse-worker.ts', import.meta.url).href);
  const bootstrap = `import(${api}).then(({ register }) => { register(); return import(${entry}); });`;
  return new Worker(bootstrap, { eval: true, workerData, resourceLimits });
}
