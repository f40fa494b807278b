// The contract suite ships in the package (`idempotent-consumer/contract`); the repository's own stores import it here.
export * from '../../src/contract/index.js';
