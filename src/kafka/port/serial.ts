/** Runs calls one after another: each starts once the previous one settled. */
export class SerialQueue {
  #tail: Promise<unknown> = Promise.resolve();

  run<T>(call: () => Promise<T>): Promise<T> {
    const result = this.#tail.then(call);
    this.#tail = result.catch(() => undefined);
    return result;
  }

  /** Settles once every call queued so far has settled; never rejects. */
  idle(): Promise<unknown> {
    return this.#tail;
  }
}
