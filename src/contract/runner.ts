import * as nodeTest from 'node:test';

/** A test body: the suite's tests take no arguments from the runner. */
export type TestBody = () => Promise<void>;

/**
 * The parts of a test runner the suite uses. node:test, Vitest, Jest and Mocha all fit: `describe(name, fn)` and
 * `it(name, fn)` (or `test`), with `it.skip` where the runner has it.
 */
export interface TestRunner {
  readonly describe: (name: string, fn: () => void) => unknown;
  readonly it: ((name: string, fn: TestBody) => unknown) & { skip?: (name: string, fn: TestBody) => unknown };
}

/** How the suite's files declare a test: a name, optionally `{ skip: reason }`, and the body. */
export interface ContractIt {
  (name: string, fn: TestBody): void;
  (name: string, options: { skip: string | false }, fn: TestBody): void;
}

/** node:test, the default runner: declared skips keep their reason. */
const nodeIt = nodeTest.it as ContractIt;

/** The suite's `describe` and `it` on the given runner (node:test when none is given). */
export function resolveRunner(runner: Partial<TestRunner> & { test?: TestRunner['it'] } = {}): {
  describe: TestRunner['describe'];
  it: ContractIt;
} {
  const describe = runner.describe;
  const it = runner.it ?? runner.test;
  if (describe === undefined && it === undefined) return { describe: nodeTest.describe, it: nodeIt };
  if (typeof describe !== 'function') throw new TypeError('runner.describe must be a function');
  if (typeof it !== 'function') throw new TypeError('runner.it (or runner.test) must be a function');
  const foreignIt: ContractIt = (name: string, a: TestBody | { skip: string | false }, b?: TestBody) => {
    const [skip, fn] = typeof a === 'function' ? [false, a] : [a.skip, b as TestBody];
    // A runner without it.skip gets no test at all for a capability the store does not declare.
    if (skip === false) it(name, fn);
    else it.skip?.(`${name} (skipped: ${skip})`, fn);
  };
  return { describe, it: foreignIt };
}
