import { consumerConfigSchema } from '../consumer/options.js';
import { repositorySectionSchema } from './repository.js';

/**
 * The sections every idem config shares, each defaulted when its table is absent. Compose your own schema
 * from them: `z.object({ ...configSections, kafka: kafkaSchema }).strict()`.
 */
export const configSections = {
  repository: repositorySectionSchema.prefault({}),
  consumer: consumerConfigSchema.prefault({}),
};
