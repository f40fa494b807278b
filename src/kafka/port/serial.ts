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

/** Runs `attempt` until it resolves; after failure n (1 first) `retry` gives the wait in ms, or undefined to throw. */
export async function retrying<T>(
  attempt: () => Promise<T>,
  retry: (error: unknown, failures: number) => number | undefined,
): Promise<T> {
  for (let failures = 1; ; failures++) {
    try {
      return await attempt();
    } catch (error) {
      const wait = retry(error, failures);
      if (wait === undefined) throw error;
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}
