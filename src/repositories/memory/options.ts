import { z } from 'zod';
import { storeOptionsParser } from '../shared.js';

/** Defaults of the memory repository, written once. */
export const memoryDefaults = {
  /** Most ids kept; the least recently added are evicted first (and could then repeat). */
  maxEntries: 1_000_000,
} as const;

/** Config schema for `repository.type = "memory"`. */
export const memoryOptionsSchema = z
  .object({
    maxEntries: z.number().int().positive().default(memoryDefaults.maxEntries),
  })
  .strict();

/** Options of {@link MemoryRepository}. */
export type MemoryRepositoryOptions = z.input<typeof memoryOptionsSchema> & { clock?: () => number };

/** Parsed options of the memory repository. */
export type MemoryOptions = z.output<typeof memoryOptionsSchema>;

/** Validates options given in code; a bad one is a ConfigError naming the option and `owner`. */
export const parseMemoryOptions = storeOptionsParser(memoryOptionsSchema, 'new MemoryRepository(...)');
