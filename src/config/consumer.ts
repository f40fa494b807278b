import { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import {
  type ConsumerConfig,
  eventTimeFromConfig,
  type IdempotentConsumerOptions,
} from '../consumer/options.js';
import type { IdSelector } from '../consumer/types.js';
import { ConfigError } from '../errors.js';
import type { IdempotentRepository } from '../store/types.js';
import { openRepository, type RepositorySection, type ResolveRepositoryOptions } from './repository.js';

/** The part of a loaded config that builds a consumer: `[repository]` and `[consumer]`. */
export interface ConsumerSetupConfig {
  readonly repository: RepositorySection;
  readonly consumer: ConsumerConfig;
}

/** What only code can give a config-built consumer; it wins over `[consumer]`. */
export interface ConsumerCodeOptions<M> {
  /** Replaces `consumer.id` (e.g. a function or a composite id). */
  readonly id?: IdSelector<M>;
  /** Consumer options beyond the config file (hooks, fixed policies); they win over `[consumer]`. */
  readonly consumer?: Partial<Omit<IdempotentConsumerOptions<M>, 'repository' | 'id'>>;
}

/**
 * The consumer options a `[consumer]` table and code options describe, over `repository`: the one way config
 * becomes a consumer (CLI, node, DI container), so a key means the same everywhere.
 */
export function consumerOptionsFromConfig<M>(
  consumer: ConsumerConfig,
  repository: IdempotentRepository,
  code: ConsumerCodeOptions<M> = {},
): IdempotentConsumerOptions<M> {
  const id = code.id ?? consumer.id;
  if (id === undefined) {
    throw new ConfigError(
      'consumer.id',
      'is required: the dotted field path of the message id (or pass an id in code)',
    );
  }
  // The table is code's options but for the durations' names (and eventTime's shape).
  const { id: _id, ttl, lease, lockTimeout, eventTime, ...same } = consumer;
  return {
    repository,
    id,
    ...same,
    ttlMs: ttl,
    leaseMs: lease,
    lockTimeoutMs: lockTimeout,
    eventTime: eventTime && (eventTimeFromConfig(eventTime) as IdempotentConsumerOptions<M>['eventTime']),
    ...code.consumer,
  };
}

/** Builds a consumer from the `[consumer]` table over an opened repository; code options win. */
export function consumerFromConfig<M>(
  consumer: ConsumerConfig,
  repository: IdempotentRepository,
  code: ConsumerCodeOptions<M> = {},
): IdempotentConsumer<M> {
  return new IdempotentConsumer<M>(consumerOptionsFromConfig(consumer, repository, code));
}

/** A store and the consumer over it, built from config; close the repository when done. */
export interface ConsumerSetup<M> {
  readonly repository: IdempotentRepository;
  readonly consumer: IdempotentConsumer<M>;
}

/** Opens the configured store and builds the consumer over it; the store is closed again if the options are refused. */
export async function openConsumer<M>(
  config: ConsumerSetupConfig,
  code: ConsumerCodeOptions<M> & ResolveRepositoryOptions = {},
): Promise<ConsumerSetup<M>> {
  const repository = await openRepository(config, code);
  try {
    return { repository, consumer: consumerFromConfig(config.consumer, repository, code) };
  } catch (error) {
    await repository.close().catch(() => undefined);
    throw error;
  }
}
