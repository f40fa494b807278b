import { fstatSync, writeSync } from 'node:fs';
import { isatty } from 'node:tty';
import { OutputError } from '../errors.js';

/** Writes every byte of `data` to `fd`: a write that makes no progress throws `stalled(at)`, never loses data. */
export function writeAllSync(fd: number, data: Uint8Array, stalled: (at: number) => Error): void {
  for (let at = 0; at < data.length; ) {
    const n = writeSync(fd, data, at, data.length - at);
    if (n <= 0) throw stalled(at);
    at += n;
  }
}

/**
 * Writes `idem dedup`'s output and resolves only once every byte has been handed to the OS, so that after a
 * kill a marked id's line is in the output. Any error or short write rejects, so the batch is not marked.
 *
 * A file or device is written through its descriptor: for those Node's stdout ignores a short write (a full
 * disk first accepts part of a write), which would let a batch count as written when part of it was not.
 */
export class Output {
  #error: OutputError | undefined;
  /** Whether stdout is written through its descriptor: not a pipe, a socket or a terminal. */
  readonly #direct: boolean = false;

  constructor() {
    try {
      const stat = fstatSync(1);
      this.#direct = !stat.isFIFO() && !stat.isSocket() && !isatty(1);
    } catch {
      // A closed stdout: the stream reports the error on the first write.
    }
    // Without a listener an EPIPE would crash the process before the write callback could report it.
    if (!this.#direct) process.stdout.on('error', (error) => (this.#error ??= this.#fail(error)));
  }

  get error(): OutputError | undefined {
    return this.#error;
  }

  /** True when the reader went away (`| head` exited): the run just ends, quietly. */
  get closedByReader(): boolean {
    const code = (this.#error?.cause as NodeJS.ErrnoException | undefined)?.code;
    return code === 'EPIPE' || code === 'ERR_STREAM_DESTROYED';
  }

  /** Writes all of `data`; rejects with an OutputError on any error or short write. */
  write(data: Uint8Array): Promise<void> {
    if (this.#error !== undefined) return Promise.reject(this.#error);
    const written = this.#direct ? this.#toFd(data) : this.#toStream(data);
    return written.catch((error: unknown) => {
      this.#error ??= error instanceof OutputError ? error : this.#fail(error as NodeJS.ErrnoException);
      throw this.#error;
    });
  }

  #toStream(data: Uint8Array): Promise<void> {
    return new Promise((resolve, reject) => {
      try {
        process.stdout.write(data, (error) => (error ? reject(error) : resolve()));
      } catch (error) {
        reject(error); // a synchronous stream (a file behind process.stdout) throws instead
      }
    });
  }

  /** Synchronous: an asynchronous write would idle the main thread for a thread-pool round trip per batch. */
  async #toFd(data: Uint8Array): Promise<void> {
    writeAllSync(1, data, (at) => {
      const message = `wrote ${at} of ${data.length} bytes, then nothing; the lines of this batch were not marked`;
      return new OutputError(`writing to stdout failed: ${message}`);
    });
  }

  #fail(error: NodeJS.ErrnoException): OutputError {
    return new OutputError(
      `writing to stdout failed (${error.message}); the lines of this batch were not marked, a re-run writes them again`,
      { cause: error },
    );
  }
}
