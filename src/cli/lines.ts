import { open } from 'node:fs/promises';
import { addAbortSignal, type Readable } from 'node:stream';
import { setImmediate } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type { ParsedPiece, SplitPiece, ToWorker, WorkerData } from './parse.js';

/**
 * A batch of parsed input lines: runs of lines of the parsed pieces, not copied out, and their ids gathered
 * into one array. A line's bytes are exactly as read (the newline excluded).
 */
export class LineBatch {
  /** The line's id; undefined for an invalid line. */
  readonly ids: (string | undefined)[] = [];
  /** The pooled chunk buffers the lines lie in: reused for reading once the caller is done with the batch. */
  readonly held: ArrayBuffer[] = [];
  /** Input bytes of the batch's lines, newlines included (for the progress bar). */
  bytes = 0;
  readonly #runs: Run[] = [];
  /** Invalid lines (few) by index: why, and an over-long one's byte length (its bytes were not kept). */
  readonly #invalid = new Map<number, [reason: string, dropped: number | undefined]>();

  get length(): number {
    return this.ids.length;
  }

  /** Adds lines `from` to `to` (exclusive) of a parsed piece: line `from` is line `line` (1-based) of `source`. */
  add(piece: SplitPiece, from: number, to: number, source: string, line: number): void {
    const { data, starts, ends, ids } = piece;
    this.#runs.push({ data, starts, ends, from, first: this.ids.length, count: to - from, source, line });
    let bytes = 0;
    for (let k = from; k < to; k++) {
      this.ids.push(ids[k]);
      bytes += (ends[k] as number) - (starts[k] as number) + 1;
    }
    this.bytes += bytes;
  }

  /** Marks line `i` invalid, for `reason`; over-long when `dropped` (its length with newline) is given. */
  setInvalid(i: number, reason: string, dropped?: number): void {
    this.#invalid.set(i, [reason, dropped]);
    if (dropped !== undefined) this.bytes += dropped - 1; // `add` counted its empty range as one byte
  }

  /** Why line `i` has no id (undefined for a line with an id). */
  reason(i: number): string | undefined {
    return this.#invalid.get(i)?.[0];
  }

  /** `file:line` of line `i`, for messages. */
  location(i: number): string {
    return `${this.source(i)}:${this.line(i)}`;
  }

  /** The input line `i` was read from (its name as given, `-` for stdin). */
  source(i: number): string {
    return this.#runOf(i).source;
  }

  /** Line number (1-based) of line `i` in its {@link source}. */
  line(i: number): number {
    const run = this.#runOf(i);
    return run.line + i - run.first;
  }

  /** Byte length of line `i` plus its newline (as read, for a dropped line). */
  size(i: number): number {
    const dropped = this.#invalid.get(i)?.[1];
    if (dropped !== undefined) return dropped;
    const run = this.#runOf(i);
    const k = run.from + i - run.first;
    return (run.ends[k] as number) - (run.starts[k] as number) + 1;
  }

  /** Whether line `i`'s bytes are here to be written (an over-long line's are not). */
  kept(i: number): boolean {
    return this.#invalid.get(i)?.[1] === undefined;
  }

  /** Input bytes of lines `indices`, each with its newline: the size {@link joinInto} fills. */
  joinedSize(indices: readonly number[]): number {
    let size = 0;
    for (let j = 0; j < indices.length; j++) size += this.size(indices[j] as number);
    return size;
  }

  /**
   * Copies lines `indices` (ascending, all kept), each followed by a newline, into `out`; neighbouring lines
   * of a piece are copied together, so a batch costs one copy per run of written lines.
   */
  joinInto(indices: readonly number[], out: Buffer): Buffer {
    const n = indices.length;
    const runs = this.#runs;
    let r = 0;
    let at = 0;
    let j = 0;
    while (j < n) {
      let i = indices[j] as number;
      while (i >= (runs[r] as Run).first + (runs[r] as Run).count) r++;
      const run = runs[r] as Run;
      const end = run.first + run.count;
      const offset = run.from - run.first;
      const start = run.starts[i + offset] as number;
      // The next lines of the same run follow this one in the piece's bytes (kept lines are whole): one copy.
      for (; j + 1 < n && indices[j + 1] === i + 1 && i + 1 < end; j++) i++;
      const stop = run.ends[i + offset] as number;
      out.set(run.data.subarray(start, stop), at);
      at += stop - start;
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
  readonly data: Uint8Array;
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
const CHUNK_BYTES = 1 << 18;
/** Chunks sent to the parse worker and not yet taken back: enough to keep both threads busy, little memory. */
const WINDOW = 4;

/** The worker's settings, and `signal`: it ends reading (while waiting for input); whole lines read still come out. */
export type ReadOptions = WorkerData & { readonly signal?: AbortSignal };

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
  let sent = 0;
  let received = 0;
  let failure: unknown;
  let pumpDone = false;
  let wake: (() => void) | undefined;
  let windowOpen: (() => void) | undefined;
  /** Chunk buffers free to read into; each goes to the worker and back, and is reused once its lines are done. */
  const pool: ArrayBuffer[] = [];
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

  const post = (message: ToWorker, transfer: ArrayBuffer[] = []) => {
    sent++;
    worker.postMessage(message, transfer);
  };
  /** Room for one more chunk in flight (waits while the worker is `WINDOW` chunks ahead). */
  const room = async () => {
    while (sent - received >= WINDOW && !signal.aborted) {
      await new Promise<void>((resolve) => {
        windowOpen = resolve;
      });
    }
    return !signal.aborted;
  };
  const pump = async () => {
    for (const name of inputs) {
      if (signal.aborted) break;
      if (name === STDIN) await pumpStream(process.stdin);
      else await pumpFile(name);
      post({ kind: 'end', aborted: signal.aborted });
    }
  };
  /** A file is read into pooled buffers, which the worker moves back with the lines found in them. */
  const pumpFile = async (name: string) => {
    const handle = await open(name, 'r');
    try {
      while (await room()) {
        const buffer = pool.pop() ?? new ArrayBuffer(CHUNK_BYTES);
        const { bytesRead } = await handle.read(new Uint8Array(buffer), 0, CHUNK_BYTES, null);
        if (bytesRead === 0) {
          pool.push(buffer);
          break;
        }
        post({ kind: 'chunk', data: new Uint8Array(buffer, 0, bytesRead) }, [buffer]);
      }
    } finally {
      await handle.close();
    }
  };
  /** A stream (stdin) hands out its own buffers: each chunk is copied into a pooled one (or its own, if larger). */
  const pumpStream = async (stream: Readable) => {
    addAbortSignal(signal, stream);
    try {
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        if (!(await room())) break;
        const data =
          chunk.length <= CHUNK_BYTES
            ? new Uint8Array(pool.pop() ?? new ArrayBuffer(CHUNK_BYTES), 0, chunk.length)
            : new Uint8Array(chunk.length);
        data.set(chunk);
        post({ kind: 'chunk', data }, [data.buffer as ArrayBuffer]);
      }
    } catch (error) {
      if (!signal.aborted) throw error;
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

  /** A chunk buffer no batch holds goes back to the pool (a larger one, made for one stdin chunk, does not). */
  const release = (buffer: ArrayBuffer) => {
    if (buffer.byteLength === CHUNK_BYTES) pool.push(buffer);
  };

  // Replies come in order: an input's chunks, then its end (the reply without a chunk).
  let input = 0;
  let lineNumber = 0;
  let batch = new LineBatch();
  try {
    for (;;) {
      const reply = replies.shift();
      if (reply === undefined) {
        if (failure !== undefined) throw failure;
        if (pumpDone && received === sent) break;
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      received++;
      windowOpen?.();
      windowOpen = undefined;
      // The caller's batches run on promises alone (the store answers most calls synchronously): without a
      // turn of the event loop per chunk, no read or worker message would complete until every parsed line
      // was used.
      await setImmediate();
      const source = inputs[input] === STDIN ? '<stdin>' : (inputs[input] as string);
      const { chunk } = reply;
      for (const piece of reply.pieces) {
        const count = piece.ids.length;
        let nextInvalid = 0;
        for (let from = 0; from < count; ) {
          const to = Math.min(count, from + batchSize - batch.length);
          const first = batch.length - from; // batch index of the piece's line 0
          batch.add(piece, from, to, source, lineNumber + 1);
          if (chunk && !batch.held.includes(chunk)) batch.held.push(chunk);
          lineNumber += to - from;
          for (; nextInvalid < piece.invalid.length; nextInvalid++) {
            const [index, reason, dropped] = piece.invalid[nextInvalid] as [number, string, number?];
            if (index >= to) break;
            batch.setInvalid(first + index, reason, dropped);
          }
          from = to;
          if (batch.length >= batchSize) {
            yield batch;
            // The caller is done with the batch (written and marked): its chunks can be read into again, but
            // for the one whose lines are still being added.
            for (const buffer of batch.held) if (buffer !== chunk) release(buffer);
            batch = new LineBatch();
          }
        }
      }
      if (chunk === undefined) [input, lineNumber] = [input + 1, 0];
      else if (!batch.held.includes(chunk)) release(chunk);
    }
    if (failure !== undefined) throw failure;
    if (batch.length > 0) yield batch;
  } finally {
    stop.abort();
    windowOpen?.();
    await worker.terminate();
  }
}

function startWorker(workerData: WorkerData): Worker {
  // V8's default young generation held ~50 MB more RSS for nothing. Measured (1M lines): 4 MiB saved another
  // ~12 MB but tripled the worker's GC time; 12 MiB kept the run as fast as the default.
  const resourceLimits = { maxYoungGenerationSizeMb: 12 };
  if (!import.meta.url.endsWith('.ts'))
    return new Worker(new URL('./parse-worker.js', import.meta.url), { workerData, resourceLimits });
  // Running from source (tsx): the worker is TypeScript too, and workers do not inherit tsx's loader, so a
  // small bootstrap registers it first.
  const api = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  const entry = JSON.stringify(new URL('./parse-worker.ts', import.meta.url).href);
  const bootstrap = `import(${api}).then(({ register }) => { register(); return import(${entry}); });`;
  return new Worker(bootstrap, { eval: true, workerData, resourceLimits });
}
