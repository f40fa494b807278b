import { storeModule } from '../module.js';
import { DynamoDbRepository } from './dynamodb-repository.js';
import { dynamodbOptionsSchema } from './options.js';

export { DynamoDbRepository } from './dynamodb-repository.js';
export { ATTR as dynamodbAttributes } from './item.js';
export {
  /** @deprecated Use DynamoDbOptions. */
  type DynamoDbConfig,
  type DynamoDbLogger,
  type DynamoDbOptions,
  type DynamoDbRepositoryOptions,
  dynamodbDefaults,
  dynamodbOptionsSchema,
  /** @deprecated Use parseDynamoDbOptions. */
  parseDynamoDbConfig,
  parseDynamoDbOptions,
} from './options.js';

/** Selected by `repository.type = "dynamodb"`. */
export const repositoryModule = storeModule('dynamodb', dynamodbOptionsSchema, DynamoDbRepository.open);
