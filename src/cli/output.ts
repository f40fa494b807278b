/**
 * Writes to stdout and resolves only once the stream has handed the bytes to the OS (the write callback),
 * which is what lets the caller mark ids as written: after a kill, a marked id's line is in the output.
 */
export class Output {
  #error: NodeJS.ErrnoException | undefined;

  constructor(private readonly stream: NodeJS.WritableStream = process.stdout) {
    // Without a listener an EPIPE would crash the process before the write callback could report it.
    stream.on('error', (error: NodeJS.ErrnoException) => {
      this.#error ??= error;
    });
  }

  /** The first write error seen, if any. */
  get error(): NodeJS.ErrnoException | undefined {
    return this.#error;
  }

  /** True when the reader went away (`| head` exited): the run just ends, quietly. */
  get closedByReader(): boolean {
    const code = this.#error?.code;
    return code === 'EPIPE' || code === 'ERR_STREAM_DESTROYED';
  }

  /** Writes `data`; rejects with the stream's own error (EPIPE when the reader went away). */
  write(data: Uint8Array): Promise<void> {
    if (this.#error !== undefined) return Promise.reject(this.#error);
    return new Promise((resolve, reject) => {
      this.stream.write(data, (error) => {
        if (error) {
          this.#error ??= error as NodeJS.ErrnoException;
          reject(error);
        } else resolve();
      });
    });
  }
}
