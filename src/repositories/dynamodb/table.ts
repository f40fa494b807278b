import { setTimeout as sleep } from 'node:timers/promises';
import {
  CreateTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  type TableDescription,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { ConfigError, errorMessage, RepositoryError } from '../../errors.js';
import { ATTR } from './item.js';
import type { DynamoDbLogger, DynamoDbOptions } from './options.js';

const ACTIVE_DEADLINE_MS = 120_000;

type Target = DynamoDbOptions & { readonly where: string };

/** The credentials, not the endpoint, are wrong. */
const AUTH_ERRORS = new Set([
  'UnrecognizedClientException',
  'InvalidSignatureException',
  'AccessDeniedException',
  'MissingAuthenticationTokenException',
  'ExpiredTokenException',
]);

/** Checks at open that the table is usable (creating it with `createTable`): a bad setup fails at startup. */
export async function ensureTable(
  client: DynamoDBClient,
  config: DynamoDbOptions,
  logger: DynamoDbLogger,
  endpoint: string,
): Promise<void> {
  const at = { ...config, where: endpoint };
  let table = await describe(client, at);
  if (table === undefined) {
    if (!config.createTable) {
      throw new ConfigError(
        'repository.table',
        `table "${config.table}" does not exist at ${endpoint}; create it (partition key "id", type S) ` +
          'or set repository.createTable = true',
      );
    }
    await create(client, at);
    table = await waitActive(client, at);
    await enableTtl(client, at, logger);
  } else if (table.TableStatus !== 'ACTIVE') {
    table = await waitActive(client, at);
  }
  checkKeySchema(table, config);
}

async function describe(client: DynamoDBClient, config: Target): Promise<TableDescription | undefined> {
  try {
    return (await client.send(new DescribeTableCommand({ TableName: config.table }))).Table;
  } catch (error) {
    if (errorName(error) === 'ResourceNotFoundException') return undefined;
    throw startupError(error, config);
  }
}

async function create(client: DynamoDBClient, config: Target): Promise<void> {
  try {
    await client.send(
      new CreateTableCommand({
        TableName: config.table,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [{ AttributeName: ATTR.id, AttributeType: 'S' }],
        KeySchema: [{ AttributeName: ATTR.id, KeyType: 'HASH' }],
      }),
    );
  } catch (error) {
    // Another process is creating the same table right now: wait for it like for our own.
    if (errorName(error) === 'ResourceInUseException') return;
    throw startupError(error, config);
  }
}

async function waitActive(client: DynamoDBClient, config: Target): Promise<TableDescription> {
  const deadline = Date.now() + ACTIVE_DEADLINE_MS;
  for (let delay = 50; ; delay = Math.min(delay * 2, 2_000)) {
    const table = await describe(client, config);
    if (table?.TableStatus === 'ACTIVE') return table;
    if (Date.now() > deadline) {
      throw new RepositoryError(
        `dynamodb table "${config.table}" is not ACTIVE after ${ACTIVE_DEADLINE_MS} ms (status ${table?.TableStatus ?? 'missing'})`,
        { retryable: true },
      );
    }
    await sleep(delay);
  }
}

/** An emulator without UpdateTimeToLive (dynalite) gets a warning: reads judge expiry, but nothing deletes items. */
async function enableTtl(client: DynamoDBClient, config: Target, logger: DynamoDbLogger): Promise<void> {
  try {
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: config.table,
        TimeToLiveSpecification: { AttributeName: ATTR.ttl, Enabled: true },
      }),
    );
  } catch (error) {
    const name = errorName(error);
    if (name === 'UnknownOperationException') {
      logger.warn(
        `dynamodb: ${config.where} does not support UpdateTimeToLive; table "${config.table}" was created ` +
          `without TTL on "${ATTR.ttl}", so expired records are ignored but never deleted`,
      );
      return;
    }
    throw new RepositoryError(
      `dynamodb: created table "${config.table}" but could not enable TTL on "${ATTR.ttl}" (${name}); ` +
        'enable it by hand, or expired records are never deleted',
      { cause: error, retryable: false },
    );
  }
}

function checkKeySchema(table: TableDescription, config: DynamoDbOptions): void {
  const hash = table.KeySchema?.find((k) => k.KeyType === 'HASH')?.AttributeName;
  const type = table.AttributeDefinitions?.find((a) => a.AttributeName === hash)?.AttributeType;
  const hasRange = table.KeySchema?.some((k) => k.KeyType === 'RANGE');
  if (hash !== ATTR.id || type !== 'S' || hasRange) {
    throw new ConfigError(
      'repository.table',
      `table "${config.table}" must have only a string partition key named "${ATTR.id}" ` +
        `(found ${hash ?? 'none'}:${type ?? '?'}${hasRange ? ' plus a sort key' : ''})`,
    );
  }
}

/** No answer names the endpoint, a refusal the credentials. */
function startupError(error: unknown, config: Target): Error {
  const name = errorName(error);
  const detail = errorMessage(error);
  if (AUTH_ERRORS.has(name)) {
    return new ConfigError('repository.credentials', `${config.where} rejected the credentials: ${detail}`, {
      cause: error,
    });
  }
  const status = (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
  if (status === undefined) {
    return new ConfigError(
      'repository.endpoint',
      `cannot reach DynamoDB at ${config.where}: ${name}${detail ? ` ${detail}` : ''}`,
      { cause: error },
    );
  }
  return new RepositoryError(`dynamodb: checking table "${config.table}" failed: ${detail}`, {
    cause: error,
  });
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : '';
}
