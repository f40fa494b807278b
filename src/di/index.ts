export {
  type BuildContainerOptions,
  buildContainer,
  type ContainerConfig,
  consumerFromConfig,
  consumerOf,
  createContainer,
  disposeContainer,
  repositoryOf,
} from './container.js';
export { CONFIG, CONSUMER, REPOSITORY } from './tokens.js';
