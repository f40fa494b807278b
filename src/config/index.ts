export { type ConsumerConfig, consumerConfigSchema, consumerDefaults } from '../consumer/options.js';
export { type RepositoryType, repositoryTypes } from '../repositories/registry.js';
export { coerceEnvValue, type EnvOverride } from './env.js';
export { DEFAULT_ENV_PREFIX, type LoadConfigOptions, loadConfig, parseToml } from './load.js';
export {
  openRepository,
  type RepositorySection,
  type ResolvedRepository,
  repositorySectionSchema,
  resolveRepository,
} from './repository.js';
export { configSections } from './sections.js';
export { type ConfigOverride, type ConfigSourceInfo, configSource } from './sources.js';
