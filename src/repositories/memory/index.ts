import { storeModule } from '../module.js';
import { MemoryRepository } from './memory-repository.js';
import { memoryOptionsSchema } from './options.js';

export { MemoryRepository } from './memory-repository.js';
export {
  type MemoryOptions,
  type MemoryRepositoryOptions,
  memoryDefaults,
  memoryOptionsSchema,
  parseMemoryOptions,
} from './options.js';

/** Selected by `repository.type = "memory"`. */
export const repositoryModule = storeModule('memory', memoryOptionsSchema, MemoryRepository.open);
