import { storeModule } from '../module.js';
import { KafkaRepository } from './kafka-repository.js';
import { kafkaOptionsSchema } from './options.js';

export { KafkaRepository } from './kafka-repository.js';
export {
  type KafkaOptions,
  type KafkaRepositoryOptions,
  kafkaDefaults,
  kafkaOptionsSchema,
  /** @deprecated Use kafkaDefaults. */
  kafkaRepositoryDefaults,
  parseKafkaOptions,
} from './options.js';

/** Selected by `repository.type = "kafka"`. */
export const repositoryModule = storeModule('kafka', kafkaOptionsSchema, KafkaRepository.open);
