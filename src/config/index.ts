export { type ConsumerConfig, consumerConfigSchema, consumerDefaults } from '../consumer/options.js';
export { type OptionsOrigin, optionError, parseOptions, toConfigError } from '../options/issues.js';
export { isSecretKey, redactValue } from '../options/redact.js';
export {
  type ConfigOverride,
  type ConfigSourceInfo,
  configSource,
  type EnvOverride,
} from '../options/sources.js';
export { type RepositoryType, repositoryTypes } from '../repositories/registry.js';
export {
  type ConsumerCodeOptions,
  type ConsumerSetup,
  type ConsumerSetupConfig,
  consumerFromConfig,
  consumerOptionsFromConfig,
  openConsumer,
} from './consumer.js';
export { coerceEnvValue } from './env.js';
export { DEFAULT_ENV_PREFIX, type LoadConfigOptions, loadConfig, parseToml } from './load.js';
export {
  openRepository,
  type RepositorySection,
  type ResolvedRepository,
  type ResolveRepositoryOptions,
  repositorySectionSchema,
  resolveRepository,
} from './repository.js';
export { configSections } from './sections.js';
