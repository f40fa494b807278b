import { createReadStream } from 'node:fs';
import { addAbortSignal, type Readable } from 'node:stream';
import { Worker } from 'node:worker_threads';
import type { ParsedPiece, ToWorker } from './worker-protocol.js';

/**
 * A batch of parsed input lines, kept as parallel arrays rather than an object per line: a 10M-line run would
 * otherwise spend its time allocating and collecting them. A line's bytes are `chunks[i][starts[i], ends[i])`
 * (the newline excluded), exactly as read, so writing them back reproduces the input.
 */
export class LineBatch {
  readonly chunks: Buffer[] = [];
  readonly starts: number[] = [];
  readonly ends: number[] = [];
  /** The line's id; undefined for an invalid line. */
  readonly ids: (string | undefined)[] = [];
  /** Why an invalid line is invalid. */
  readonly reasons: (string | undefined)[] = [];
  /** File name, or `<stdin>`. */
  readonly sources: string[] = [];
  /** 1-based line numbers within their source. */
  readonly lines: number[] = [];
  /** Over-long lines (index → their byte length): reported and skipped, never written, as their bytes were not kept. */
  readonly dropped = new Map<number, number>();

  get length(): number {
    return this.ids.length;
  }

  /** `file:line` of line `i`, for messages. */
  location(i: number): string {
    return `${this.sources[i]}:${this.lines[i]}`;
  }

  /** Byte length of line `i` plus its newline (as read, for a dropped line). */
  size(i: number): number {
    return this.dropped.get(i) ?? (this.ends[i] as number) - (this.starts[i] as number) + 1;
  }

  /** Whether line `i`'s bytes are here to be written (an over-long line's are not). */
  kept(i: number): boolean {
    return !this.dropped.has(i);
  }

  /** Copies line `i` and a newline into `out` at `at`; returns the next offset. */
  copyLine(i: number, out: Buffer, at: number): number {
    const next = at + (this.chunks[i] as Buffer).copy(out, at, this.starts[i], this.ends[i]);
    out[next] = NEWLINE;
    return next + 1;
  }
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
      const data = Buffer.from(piece.data.buffer, piece.data.byteOffset, piece.data.byteLength);
      let nextInvalid = 0;
      let nextDropped = 0;
      for (let i = 0; i < piece.ids.length; i++) {
        let reason: string | undefined;
        if (piece.invalid[nextInvalid]?.[0] === i)
          reason = (piece.invalid[nextInvalid++] as [number, string])[1];
        if (piece.dropped[nextDropped]?.[0] === i) {
          batch.dropped.set(batch.length, (piece.dropped[nextDropped++] as [number, number])[1]);
        }
        batch.chunks.push(data);
        batch.starts.push(piece.starts[i] as number);
        batch.ends.push(piece.ends[i] as number);
        batch.ids.push(piece.ids[i]);
        batch.reasons.push(reason);
        batch.sources.push(source);
        batch.lines.push(++(lineNumbers[input] as number));
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
