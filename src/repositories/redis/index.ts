import { storeModule } from '../module.js';
import { redisOptionsSchema } from './options.js';
import { RedisRepository } from './redis-repository.js';

export {
  parseRedisOptions,
  type RedisOptions,
  type RedisRepositoryOptions,
  redisDefaults,
  redisOptionsSchema,
} from './options.js';
export { type RedisClientRepositoryOptions, RedisRepository } from './redis-repository.js';

/** Selected by `repository.type = "redis"`. */
export const repositoryModule = storeModule('redis', redisOptionsSchema, RedisRepository.open);
