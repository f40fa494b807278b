// tsyringe needs the Reflect metadata API to exist before it loads, even though we register by token only.
import 'reflect-metadata';
import { type DependencyContainer, instanceCachingFactory, container as rootContainer } from 'tsyringe';
import {
  type ConsumerCodeOptions,
  type ConsumerSetupConfig,
  consumerFromConfig,
} from '../config/consumer.js';
import { openRepository, type ResolveRepositoryOptions } from '../config/repository.js';
import type { IdempotentConsumer } from '../consumer/idempotent-consumer.js';
import type { IdempotentRepository } from '../store/types.js';
import { CONFIG, CONSUMER, REPOSITORY } from './tokens.js';

/** The part of a loaded config the container reads: `[repository]` and `[consumer]`. */
export type ContainerConfig = ConsumerSetupConfig;

/** Options only code can give: hooks, an id function, a parent container. */
export interface BuildContainerOptions<M> extends ConsumerCodeOptions<M>, ResolveRepositoryOptions {
  /** The container to derive from; default tsyringe's root container. Ours is always a child of it. */
  readonly parent?: DependencyContainer;
}

/**
 * Builds a child container from config: opens the repository (tsyringe factories are synchronous, so it is
 * registered as a value) and registers a factory for the consumer. Close with {@link disposeContainer}.
 */
export async function buildContainer<M = unknown>(
  config: ContainerConfig,
  options: BuildContainerOptions<M> = {},
): Promise<DependencyContainer> {
  return createContainer(config, await openRepository(config, options), options);
}

/** {@link buildContainer}'s synchronous half: registers an already opened repository and the consumer. */
export function createContainer<M = unknown>(
  config: ContainerConfig,
  repository: IdempotentRepository,
  options: BuildContainerOptions<M> = {},
): DependencyContainer {
  const child = (options.parent ?? rootContainer).createChildContainer();
  child.register(CONFIG, { useValue: config });
  child.register<IdempotentRepository>(REPOSITORY, { useValue: repository });
  child.register<IdempotentConsumer<M>>(CONSUMER, {
    useFactory: instanceCachingFactory((c) =>
      consumerFromConfig<M>(c.resolve<ContainerConfig>(CONFIG).consumer, c.resolve(REPOSITORY), options),
    ),
  });
  return child;
}

export function repositoryOf(container: DependencyContainer): IdempotentRepository {
  return container.resolve<IdempotentRepository>(REPOSITORY);
}

export function consumerOf<M = unknown>(container: DependencyContainer): IdempotentConsumer<M> {
  return container.resolve<IdempotentConsumer<M>>(CONSUMER);
}

/** Closes the repository the container opened (flushing embedded stores). */
export async function disposeContainer(container: DependencyContainer): Promise<void> {
  await repositoryOf(container).close();
}
