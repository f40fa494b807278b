/**
 * What the test helpers need of a `TestContext` (`after`, `diagnostic`), for `npm run chaos`, which runs the
 * scenarios outside node:test: cleanups run in reverse order when the scope closes, even after a failure.
 */
import type { TestContext } from 'node:test';

export class Scope {
  readonly #cleanups: (() => unknown)[] = [];

  constructor(readonly log: (line: string) => void = () => undefined) {}

  after(fn: () => unknown): void {
    this.#cleanups.push(fn);
  }

  diagnostic(line: string): void {
    this.log(line);
  }

  /** The scope in the helpers' type: they call only `after` (and `diagnostic`). */
  get context(): TestContext {
    return this as unknown as TestContext;
  }

  /** Runs every cleanup, the last registered first; throws the first failure after running them all. */
  async close(): Promise<void> {
    let failure: unknown;
    for (const cleanup of this.#cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        failure ??= error;
      }
    }
    if (failure !== undefined) throw failure;
  }
}
