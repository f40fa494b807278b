import { basicTests } from './basic.js';
import { batchTests } from './batch.js';
import { claimTests } from './claims.js';
import { ContractContext, type ContractOptions, type ContractSuite } from './context.js';
import { expiryTests } from './expiry.js';
import { firstSeenTests } from './first-seen.js';
import { idTests } from './ids.js';
import { leaseTests } from './leases.js';
import { lifecycleTests } from './lifecycle.js';
import { markTests } from './marks.js';
import { mutatedInputTests } from './mutated-input.js';
import { namespaceTests } from './namespaces.js';
import { recordTests } from './records.js';
import { renewalTests } from './renewal.js';
import { resultLimitTests } from './result-limits.js';
import { resultTests } from './results.js';
import { resolveRunner } from './runner.js';
import { scanTests } from './scan.js';
import { transactionTests } from './transactions.js';
import { verbTests } from './verbs.js';

export type { ContractOptions, ContractSuite, RepositoryFactory } from './context.js';
export type { ContractIt, TestBody, TestRunner } from './runner.js';
export {
  basicTests,
  batchTests,
  claimTests,
  expiryTests,
  firstSeenTests,
  idTests,
  leaseTests,
  lifecycleTests,
  markTests,
  mutatedInputTests,
  namespaceTests,
  recordTests,
  renewalTests,
  resultLimitTests,
  resultTests,
  scanTests,
  transactionTests,
  verbTests,
};

/**
 * The contract every repository passes, unchanged: call it from the store's test file with a factory and the
 * store's declared capabilities. Tests are skipped only where the declared capabilities rule them out. It
 * registers its tests with node:test, or with the `runner` given (`{ describe, it }` of Vitest, Jest, Mocha).
 */
export function repositoryContract(options: ContractOptions): void {
  if (typeof options?.factory !== 'function') throw new TypeError('factory must be a function');
  if (typeof options.capabilities?.maxIdBytes !== 'number')
    throw new TypeError('capabilities must be declared');

  const { describe, it } = resolveRunner(options.runner);

  const withContext = (fn: (ctx: ContractContext) => Promise<void>) => async () => {
    const ctx = new ContractContext(options);
    try {
      await fn(ctx);
    } finally {
      await ctx.dispose();
    }
  };

  const suite: ContractSuite = { it, withContext, options };
  describe(`${options.name} repository contract`, () => {
    describe('basic', () => basicTests(suite));
    describe('expiry', () => expiryTests(suite));
    describe('claims', () => claimTests(suite));
    describe('leases', () => leaseTests(suite));
    describe('lease renewal', () => renewalTests(suite));
    describe('batch', () => batchTests(suite));
    describe('ids', () => idTests(suite));
    describe('records', () => recordTests(suite));
    describe('first seen', () => firstSeenTests(suite));
    describe('results', () => resultTests(suite));
    describe('result limits', () => resultLimitTests(suite));
    describe('mutated input', () => mutatedInputTests(suite));
    describe('marks', () => markTests(suite));
    describe('namespaces', () => namespaceTests(suite));
    describe('lifecycle', () => lifecycleTests(suite));
    describe('scan', () => scanTests(suite));
    describe('verbs', () => verbTests(suite));
    describe('transactions', () => transactionTests(suite));
  });
}
