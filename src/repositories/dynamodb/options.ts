import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { z } from 'zod';
import { timerMs } from '../../options/limits.js';
import { MAX_ID_BYTES } from '../../store/ids.js';
import { clockSkewDefaults, clockSkewFields } from '../clock-skew.js';
import { type StoreLogger, storeOptionsParser } from '../shared.js';

export const dynamodbDefaults = {
  /** Region of a local emulator's endpoint when neither config nor the SDK's chain names one. */
  localEndpointRegion: 'us-east-1',
  /** No prefix: the default namespace, exact like any other (its keys start with `0:`). */
  keyPrefix: '',
  createTable: false,
  /** Conditional writes in flight at once for `addMany`/`confirmMany`; also sizes the HTTP socket pool. */
  batchConcurrency: 32,
  /** Retries after the first attempt, for throttling, network errors and unprocessed batch items. */
  maxRetries: 4,
  requestTimeoutMs: 5_000,
  ...clockSkewDefaults,
} as const;

// DynamoDB caps a string partition key at 2048 bytes; ids may take MAX_ID_BYTES, the prefix gets the rest but the
// `<length>:` header in front of it (see item.ts).
const MAX_PREFIX_BYTES = 2048 - MAX_ID_BYTES - 5;

/** Config schema for `repository.type = "dynamodb"`. */
export const dynamodbOptionsSchema = z
  .object({
    /** Table name; the table has a string partition key named `id`. */
    table: z
      .string()
      .regex(/^[a-zA-Z0-9_.-]{3,255}$/, 'must be 3-255 characters of a-z, A-Z, 0-9, "_", "-" or "."'),
    /** AWS region; when absent, the SDK's own chain (AWS_REGION, the profile's region, EC2 instance metadata). */
    region: z.string().min(1).optional(),
    /** Endpoint URL, e.g. a local emulator; AWS's regional endpoint when absent. */
    endpoint: z.url().optional(),
    /**
     * Static credentials; the SDK's default provider chain when absent. Extra keys are dropped rather than
     * rejected: the SDK tags credential objects it has used (`$source`), and a typo still fails as a missing key.
     */
    credentials: z
      .object({
        accessKeyId: z.string().min(1),
        secretAccessKey: z.string().min(1),
        sessionToken: z.string().min(1).optional(),
      })
      .optional(),
    /** The repository's namespace in the table; exact: `"app:"` never sees the ids of `"app:orders:"` (item.ts). */
    keyPrefix: z
      .string()
      .refine((p) => Buffer.byteLength(p, 'utf8') <= MAX_PREFIX_BYTES, {
        message: `must be at most ${MAX_PREFIX_BYTES} UTF-8 bytes`,
      })
      .default(dynamodbDefaults.keyPrefix),
    /** Create the table (on-demand billing, TTL on `ttl`) when it does not exist. */
    createTable: z.boolean().default(dynamodbDefaults.createTable),
    batchConcurrency: z.number().int().min(1).max(1024).default(dynamodbDefaults.batchConcurrency),
    maxRetries: z.number().int().min(0).max(20).default(dynamodbDefaults.maxRetries),
    /** Per-request timeout (connect and response), so an unreachable store fails promptly. */
    requestTimeoutMs: timerMs().default(dynamodbDefaults.requestTimeoutMs),
    ...clockSkewFields,
  })
  .strict();

export type DynamoDbOptions = z.output<typeof dynamodbOptionsSchema>;

/** @deprecated Renamed {@link DynamoDbOptions} (every store's parsed options are `<Store>Options`). */
export type DynamoDbConfig = DynamoDbOptions;

/** Where the repository reports a degraded but working setup (e.g. an emulator without TTL). */
export type DynamoDbLogger = StoreLogger;

/**
 * Options of {@link DynamoDbRepository.open}: the config keys plus what cannot come from a file. A `client` is used
 * as is (region, endpoint, credentials, retries, timeouts) and not destroyed on close.
 */
export type DynamoDbRepositoryOptions = z.input<typeof dynamodbOptionsSchema> & {
  client?: DynamoDBClient;
  /** Receives one-line warnings; without it they go to `process.emitWarning`. */
  logger?: DynamoDbLogger;
  clock?: () => number;
};

export const parseDynamoDbOptions = storeOptionsParser(dynamodbOptionsSchema, 'DynamoDbRepository.open(...)');

/** @deprecated Renamed {@link parseDynamoDbOptions}. */
export const parseDynamoDbConfig = parseDynamoDbOptions;
