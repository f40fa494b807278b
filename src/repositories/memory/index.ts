export { MemoryRepository } from './memory-repository.js';
export { type MemoryRepositoryOptions, memoryDefaults, memoryOptionsSchema } from './options.js';
