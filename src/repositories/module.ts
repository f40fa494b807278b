import type { z } from 'zod';
import type { IdempotentRepository } from '../store/types.js';

/**
 * What each store folder exports as `repositoryModule`, so config can pick a store by `repository.type`
 * without the core importing any store's client library.
 */
export interface RepositoryModule<Schema extends z.ZodType = z.ZodType> {
  /** The `repository.type` value that selects this store. */
  readonly type: string;
  /** Validates the `[repository]` table (minus `type`); unknown keys are rejected. */
  readonly optionsSchema: Schema;
  /** Opens the store. Connection problems reject with a ConfigError naming the key to fix, or a RepositoryError. */
  create(options: z.output<Schema>): Promise<IdempotentRepository>;
}

/** The {@link RepositoryModule} of a store: its `repository.type`, its options schema and its `open`. */
export function storeModule<Schema extends z.ZodType>(
  type: string,
  optionsSchema: Schema,
  create: (options: z.output<Schema>) => Promise<IdempotentRepository>,
): RepositoryModule<Schema> {
  return { type, optionsSchema, create };
}
