import { describe } from 'node:test';
import { basicTests } from './basic.js';
import { batchTests } from './batch.js';
import { claimTests } from './claims.js';
import { ContractContext, type ContractOptions } from './context.js';
import { expiryTests } from './expiry.js';
import { idTests } from './ids.js';
import { leaseTests } from './leases.js';
import { lifecycleTests } from './lifecycle.js';
import { markTests } from './marks.js';
import { namespaceTests } from './namespaces.js';
import { recordTests } from './records.js';

export type { ContractOptions, RepositoryFactory } from './context.js';
export {
  basicTests,
  batchTests,
  claimTests,
  expiryTests,
  idTests,
  leaseTests,
  lifecycleTests,
  markTests,
  namespaceTests,
  recordTests,
};

/**
 * The contract every repository passes, unchanged: call it from the store's test file with a factory and the
 * store's declared capabilities. Tests are skipped only where the declared capabilities rule them out.
 */
export function repositoryContract(options: ContractOptions): void {
  if (typeof options?.factory !== 'function') throw new TypeError('factory must be a function');
  if (typeof options.capabilities?.maxIdBytes !== 'number')
    throw new TypeError('capabilities must be declared');

  const withContext = (fn: (ctx: ContractContext) => Promise<void>) => async () => {
    const ctx = new ContractContext(options);
    try {
      await fn(ctx);
    } finally {
      await ctx.dispose();
    }
  };

  describe(`${options.name} repository contract`, () => {
    describe('basic', () => basicTests(withContext));
    describe('expiry', () => expiryTests(withContext));
    describe('claims', () => claimTests(withContext));
    describe('leases', () => leaseTests(withContext));
    describe('batch', () => batchTests(withContext));
    describe('marks', () => markTests(withContext));
    describe('ids', () => idTests(withContext));
    describe('records', () => recordTests(withContext));
    describe('namespaces', () => namespaceTests(withContext));
    describe('lifecycle', () => lifecycleTests(withContext, options));
  });
}
