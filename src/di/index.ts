export { consumerFromConfig } from '../config/consumer.js';
export {
  type BuildContainerOptions,
  buildContainer,
  type ContainerConfig,
  consumerOf,
  createContainer,
  disposeContainer,
  repositoryOf,
} from './container.js';
export { CONFIG, CONSUMER, REPOSITORY } from './tokens.js';
