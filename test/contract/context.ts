// Kept so feature files written against `./context.js` keep resolving; the suite itself lives in src/contract.
export * from '../../src/contract/context.js';
