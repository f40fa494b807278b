/** Token of the loaded config object (whatever schema it was loaded with). */
export const CONFIG: unique symbol = Symbol('idem.Config');

/** Token of the configured, already opened {@link IdempotentRepository}. */
export const REPOSITORY: unique symbol = Symbol('idem.IdempotentRepository');

/** Token of the {@link IdempotentConsumer} built from `[consumer]` over {@link REPOSITORY}. */
export const CONSUMER: unique symbol = Symbol('idem.IdempotentConsumer');
