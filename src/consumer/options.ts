import { z } from 'zod';
import { ConfigError } from '../errors.js';
import type { IdempotentRepository } from '../repositories/types.js';
import { durationMs } from '../util/duration.js';
import type { HandlerContext, IdSelector } from './types.js';

/** Defaults of the consumer, written once; config and the constructor both read them from here. */
export const consumerDefaults = {
  mode: 'eager',
  ttlMs: 24 * 3_600_000,
  leaseMs: 60_000,
  removeOnFailure: true,
  skipDuplicate: true,
  nullId: 'forward',
  inProgress: 'error',
  storeFailure: 'fail',
} as const;

/**
 * The `[consumer]` table of a config file. Function-valued options (id function, hooks) exist only in code;
 * config names the id by a dotted field path.
 */
export const consumerConfigSchema = z
  .object({
    id: z.string().min(1).optional(),
    mode: z.enum(['eager', 'lazy']).default(consumerDefaults.mode),
    ttl: durationMs.default(consumerDefaults.ttlMs),
    lease: durationMs.default(consumerDefaults.leaseMs),
    removeOnFailure: z.boolean().default(consumerDefaults.removeOnFailure),
    skipDuplicate: z.boolean().default(consumerDefaults.skipDuplicate),
    nullId: z.enum(['forward', 'reject']).default(consumerDefaults.nullId),
    inProgress: z.enum(['duplicate', 'error']).default(consumerDefaults.inProgress),
    storeFailure: z.enum(['fail', 'process']).default(consumerDefaults.storeFailure),
  })
  .strict();

/** Parsed `[consumer]` config. */
export type ConsumerConfig = z.output<typeof consumerConfigSchema>;

/** Options of {@link IdempotentConsumer}. */
export interface IdempotentConsumerOptions<M> {
  readonly repository: IdempotentRepository;
  /** Where the message id comes from: a dotted field path or a function. */
  readonly id: IdSelector<M>;
  /**
   * `eager` (default) claims the id atomically before the handler runs, so concurrent duplicates run once.
   * `lazy` checks, runs the handler, then marks: concurrent duplicates can both run.
   */
  readonly mode?: 'eager' | 'lazy';
  /** Retention: how long a handled id stays a duplicate, in ms. */
  readonly ttlMs?: number;
  /**
   * How long an unconfirmed claim blocks others, in ms. Longer than the slowest handler, or a slow handler's
   * message can run twice; short enough that a crashed worker's ids come back soon.
   */
  readonly leaseMs?: number;
  /** Release the claim when the handler throws, so a retry can succeed (default). False keeps it: at-most-once. */
  readonly removeOnFailure?: boolean;
  /** Skip the handler for duplicates (default). False runs it with `context.duplicate = true`. */
  readonly skipDuplicate?: boolean;
  /** Called for every duplicate, whether or not the handler is skipped. */
  readonly onDuplicate?: (message: M, context: HandlerContext) => Promise<void> | void;
  /** A message without id: `forward` runs the handler without dedup (KIP-655), `reject` throws NoMessageIdError. */
  readonly nullId?: 'forward' | 'reject';
  /** Another worker's live claim: report it as a `duplicate`, or as `in-progress` / InProgressError to retry. */
  readonly inProgress?: 'duplicate' | 'error';
  /** Store down: `fail` raises RepositoryError and treats nothing as new; `process` handles messages as new. */
  readonly storeFailure?: 'fail' | 'process';
}

/** Options with every default applied. */
export type ResolvedConsumerOptions<M> = Required<Omit<IdempotentConsumerOptions<M>, 'onDuplicate'>> &
  Pick<IdempotentConsumerOptions<M>, 'onDuplicate'>;

/** Applies defaults; the numbers are checked here because code-built options skip the config schema. */
export function resolveConsumerOptions<M>(options: IdempotentConsumerOptions<M>): ResolvedConsumerOptions<M> {
  const resolved = { ...consumerDefaults, ...stripUndefined(options) } as ResolvedConsumerOptions<M>;
  for (const key of ['ttlMs', 'leaseMs'] as const) {
    const value = resolved[key];
    if (!Number.isFinite(value) || value <= 0) {
      throw new ConfigError(key, `expected a positive number of milliseconds, got ${String(value)}`);
    }
  }
  if (!resolved.repository) throw new ConfigError('repository', 'a repository is required');
  if (resolved.id === undefined) throw new ConfigError('id', 'expected a field path or a function');
  return resolved;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
