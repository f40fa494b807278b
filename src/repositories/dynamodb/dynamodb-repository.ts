import {
  type AttributeValue,
  BatchGetItemCommand,
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  ScanCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { ConfigError, RepositoryError } from '../../errors.js';
import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../../store/base.js';
import { MAX_ID_BYTES } from '../../store/ids.js';
import { isLive, newRecord } from '../../store/record.js';
import type {
  AddOptions,
  AddResult,
  IdempotencyRecord,
  MarkOptions,
  RepositoryCapabilities,
} from '../../store/types.js';
import { mapLimit } from '../../util/concurrency.js';
import { checkClockSkew, offsetOf } from '../clock-skew.js';
import { backoff, chunk } from './concurrency.js';
import {
  ATTR,
  fromItem,
  type Item,
  keyOf,
  namespaceOf,
  resultValue,
  STATE_VALUE,
  toItem,
  ttlSeconds,
} from './item.js';
import {
  type DynamoDbLogger,
  type DynamoDbOptions,
  type DynamoDbRepositoryOptions,
  dynamodbDefaults,
  parseDynamoDbOptions,
} from './options.js';
import { sampleServerClock } from './server-time.js';
import { ensureTable } from './table.js';

/** BatchGetItem reads at most 100 keys per call, BatchWriteItem 25 requests. */
const GET_CHUNK = 100;
const WRITE_CHUNK = 25;
/** Claim attempts when the record changes between a failed put and the emulator fallback read (see `tryClaim`). */
const CLAIM_ATTEMPTS = 5;
/** A failed claim whose blocking record the endpoint did not return. */
const BLOCKED = Symbol('blocked');

/**
 * A claim succeeds when the id is absent or its record is no longer live. Live means `> now`, so the
 * negation is `<= now`, matching {@link isLive} exactly.
 */
const CLAIM_CONDITION =
  'attribute_not_exists(#id) OR (#state = :confirmed AND #expiresAt <= :now) OR (#state = :inflight AND #lease <= :now)';
const CLAIM_NAMES = {
  '#id': ATTR.id,
  '#state': ATTR.state,
  '#expiresAt': ATTR.expiresAt,
  '#lease': ATTR.lease,
};

/** Only the owner's in-flight record may be confirmed or released. */
const OWNER_CONDITION = '#state = :inflight AND #owner = :owner';
const OWNER_NAMES = { '#state': ATTR.state, '#owner': ATTR.owner };

const CONFIRM_UPDATE = 'SET #state = :confirmed, #expiresAt = :expiresAt, #ttl = :ttl REMOVE #lease, #owner';
/** CONFIRM_UPDATE that also keeps the outcome the consumer gives (`confirm`'s `result`). */
const CONFIRM_RESULT_UPDATE =
  'SET #state = :confirmed, #expiresAt = :expiresAt, #ttl = :ttl, #result = :result REMOVE #lease, #owner';
const CONFIRM_NAMES = {
  ...OWNER_NAMES,
  '#expiresAt': ATTR.expiresAt,
  '#ttl': ATTR.ttl,
  '#lease': ATTR.lease,
};

/**
 * Idempotent repository on a DynamoDB table (partition key `id`, string), in the manner of Powertools:
 * a claim is ONE conditional PutItem that also returns the blocking record (`ReturnValuesOnConditionCheckFailure:
 * ALL_OLD`), confirm/remove-by-owner are conditional writes, and every read checks expiry itself because DynamoDB
 * TTL deletion lags by up to 48 hours. Uses no transactions and no TTL API at run time, so dynalite works too.
 *
 * Emulators that do not return the old item on a failed condition (dynalite 4 ignores
 * ReturnValuesOnConditionCheckFailure) are detected per call: that case alone falls back to a consistent read, one
 * GetItem for `add` and one BatchGetItem per 100 blocked ids for `addMany`. See {@link DynamoDbRepository.returnsItemOnConditionFailure}.
 *
 * Several repositories share a table through their `keyPrefix`, each an exact namespace (see `namespaceOf`).
 * Times in conditions come from each worker's clock, so `open` measures the skew to the endpoint and refuses, or
 * warns, past `maxClockSkewMs`.
 *
 * Lazy marks (`markMany`) are `BatchWriteItem` puts, 25 per request, `batchConcurrency` requests in flight,
 * unprocessed items retried with backoff: no condition, so no conditional write per id. Such a put is blind: it
 * may replace a record written since the caller's read (a concurrent worker's mark or claim of the same id, which
 * that worker also handled: lazy mode's known race). The id stays held by a live confirmed record either way, but
 * the race is not seen, so it is not counted as `raced`; eager mode, which needs that atomicity, keeps its
 * conditional puts.
 *
 * Open it with {@link DynamoDbRepository.open} (or `repositoryModule.create`), which checks the table first.
 */
export class DynamoDbRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: true,
    shared: true,
    maxIdBytes: MAX_ID_BYTES,
    // Reads batch natively, but claims are one conditional put per id: DynamoDB has no conditional batch write.
    nativeBatch: false,
    // An item is at most 400 KB (409600 bytes) counting every attribute name and value; the rest of the item
    // (a key of up to 1 KB plus times, owner and fingerprint) fits in the remaining 9600 bytes.
    maxResultBytes: 400_000,
  };
  protected readonly storeName = 'dynamodb';
  readonly #client: DynamoDBClient;
  readonly #ownsClient: boolean;
  readonly #table: string;
  /** Key text in front of every id: the prefix behind its length (see namespaceOf). */
  readonly #ns: string;
  readonly #concurrency: number;
  readonly #maxRetries: number;
  /** Whether the endpoint returned the old item on a failed claim: undefined until the first duplicate. */
  #returnsOldItem: boolean | undefined;

  /**
   * Validates the options, connects and checks (or creates) the table. Rejects with a ConfigError naming the key
   * (`repository.table`, `repository.endpoint`, ...) when the setup cannot work.
   */
  static async open(options: DynamoDbRepositoryOptions): Promise<DynamoDbRepository> {
    const { client, logger, clock, ...rest } = options;
    const config = parseDynamoDbOptions(rest);
    const repo = new DynamoDbRepository(config, { client, clock });
    try {
      const region = client === undefined ? await resolveRegion(repo.#client) : undefined;
      const endpoint =
        client !== undefined
          ? 'the endpoint of the given client'
          : (config.endpoint ?? `the AWS endpoint of region ${region}`);
      await ensureTable(repo.#client, config, logger ?? processWarnings, endpoint);
      await assertClock(repo.#client, config, clock ?? Date.now, logger ?? processWarnings, endpoint);
    } catch (error) {
      await repo.close();
      throw error;
    }
    return repo;
  }

  private constructor(
    config: DynamoDbOptions,
    extra: { client?: DynamoDBClient | undefined; clock?: (() => number) | undefined },
  ) {
    super({ clock: extra.clock });
    this.#ownsClient = extra.client === undefined;
    this.#client = extra.client ?? createClient(config);
    this.#table = config.table;
    this.#ns = namespaceOf(config.keyPrefix);
    this.#concurrency = config.batchConcurrency;
    this.#maxRetries = config.maxRetries;
  }

  /**
   * Whether the endpoint returns the blocking item with a failed conditional put (real DynamoDB does; dynalite
   * does not). Undefined until the first duplicate claim has shown it.
   */
  get returnsItemOnConditionFailure(): boolean | undefined {
    return this.#returnsOldItem;
  }

  protected override async doAdd(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    const record = newRecord(entry.key, entry, options, now);
    for (let attempt = 1; ; attempt++) {
      const result = await this.tryClaim(record, now, options.minLifetimeMs);
      if (result !== BLOCKED) return result;
      // Emulator path: read what blocked the claim.
      const existing = await this.getOne(entry.key);
      if (existing !== undefined && isLive(existing, now)) return blockedBy(record, existing);
      this.assertClaimAttempts(attempt, [entry.key]);
    }
  }

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    const records = entries.map((entry) => newRecord(entry.key, entry, options, now));
    const results = new Array<AddResult>(records.length);
    let pending = records.map((_, i) => i);
    for (let attempt = 1; ; attempt++) {
      const outcomes = await mapLimit(pending, this.#concurrency, (i) =>
        this.tryClaim(records[i] as IdempotencyRecord, now, options.minLifetimeMs),
      );
      const blocked: number[] = [];
      outcomes.forEach((outcome, k) => {
        const i = pending[k] as number;
        if (outcome === BLOCKED) blocked.push(i);
        else results[i] = outcome;
      });
      if (blocked.length === 0) return results;
      // Emulator path: one batched read for all blocked ids instead of a GetItem each.
      const existing = await this.doGetMany(
        blocked.map((i) => (records[i] as IdempotencyRecord).id),
        now,
      );
      pending = [];
      blocked.forEach((i, k) => {
        const found = existing[k];
        if (found !== undefined) results[i] = blockedBy(records[i] as IdempotencyRecord, found);
        else pending.push(i);
      });
      if (pending.length === 0) return results;
      this.assertClaimAttempts(
        attempt,
        pending.map((i) => (records[i] as IdempotencyRecord).id),
      );
    }
  }

  protected override async doMarkMany(
    entries: readonly KeyedEntry[],
    options: MarkOptions,
    now: number,
  ): Promise<boolean[]> {
    const add: AddOptions = { ttlMs: options.ttlMs };
    const puts = entries.map((entry) => ({
      PutRequest: {
        Item: toItem(newRecord(entry.key, entry, add, now), this.#ns, now, options.minLifetimeMs),
      },
    }));
    await mapLimit(chunk(puts, WRITE_CHUNK), this.#concurrency, (part) => this.batchWrite(part, 'mark'));
    return entries.map(() => true);
  }

  /**
   * One conditional put decides the claim. When the condition fails, real DynamoDB hands back the live record
   * that blocked it (ALL_OLD). An endpoint that does not (dynalite) yields BLOCKED, and the caller reads the record
   * with a consistent read; should it have vanished or lapsed in between, the claim is simply tried again.
   */
  private async tryClaim(
    record: IdempotencyRecord,
    now: number,
    minLifetimeMs?: number,
  ): Promise<AddResult | typeof BLOCKED> {
    try {
      await this.#client.send(
        new PutItemCommand({
          TableName: this.#table,
          Item: toItem(record, this.#ns, now, minLifetimeMs),
          ConditionExpression: CLAIM_CONDITION,
          ExpressionAttributeNames: CLAIM_NAMES,
          ExpressionAttributeValues: {
            ':now': { N: String(now) },
            ':confirmed': STATE_VALUE.confirmed,
            ':inflight': STATE_VALUE.inFlight,
          },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { added: true, record };
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) throw error;
      this.#returnsOldItem = error.Item !== undefined;
      if (error.Item === undefined) return BLOCKED;
      return blockedBy(record, fromItem(error.Item, this.#ns));
    }
  }

  /** Gives up on ids whose record keeps flipping between the failed put and the read-back. */
  private assertClaimAttempts(attempt: number, keys: readonly string[]): void {
    if (attempt < CLAIM_ATTEMPTS) return;
    throw new RepositoryError(
      `dynamodb add: the record of ${JSON.stringify(keys[0])}${keys.length > 1 ? ` (and ${keys.length - 1} more)` : ''} ` +
        `changed under ${CLAIM_ATTEMPTS} claim attempts`,
    );
  }

  protected async doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    if (keys.length === 1) {
      const record = await this.getOne(keys[0] as string);
      return [record !== undefined && isLive(record, now) ? record : undefined];
    }
    const found = new Map<string, IdempotencyRecord>();
    await mapLimit(chunk(keys, GET_CHUNK), this.#concurrency, async (part) => {
      for (const item of await this.batchGet(part)) {
        const record = fromItem(item, this.#ns);
        if (isLive(record, now)) found.set(record.id, record);
      }
    });
    return keys.map((key) => found.get(key));
  }

  /** The stored record, live or not (TTL deletion lags, so callers check liveness). */
  private async getOne(key: string): Promise<IdempotencyRecord | undefined> {
    const { Item } = await this.#client.send(
      new GetItemCommand({ TableName: this.#table, Key: keyOf(key, this.#ns), ConsistentRead: true }),
    );
    return Item === undefined ? undefined : fromItem(Item, this.#ns);
  }

  /** Reads up to 100 keys, retrying what DynamoDB leaves unprocessed with backoff. */
  private async batchGet(keys: readonly string[]): Promise<Item[]> {
    const items: Item[] = [];
    let pending: Item[] = keys.map((key) => keyOf(key, this.#ns));
    for (let attempt = 0; ; attempt++) {
      const { Responses, UnprocessedKeys } = await this.#client.send(
        new BatchGetItemCommand({
          RequestItems: { [this.#table]: { Keys: pending, ConsistentRead: true } },
        }),
      );
      items.push(...(Responses?.[this.#table] ?? []));
      pending = UnprocessedKeys?.[this.#table]?.Keys ?? [];
      if (pending.length === 0) return items;
      if (attempt >= this.#maxRetries) {
        throw new RepositoryError(
          `dynamodb get: ${pending.length} keys still unprocessed after ${attempt + 1} BatchGetItem attempts`,
        );
      }
      await backoff(attempt);
    }
  }

  protected override doConfirm(claim: KeyedClaim, ttlMs: number, now: number): Promise<boolean> {
    return this.confirmOne(claim, ttlMs, now);
  }

  protected doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number, now: number): Promise<boolean[]> {
    return mapLimit(claims, this.#concurrency, (claim) => this.confirmOne(claim, ttlMs, now));
  }

  /** Conditional update of the owner's in-flight record to confirmed; retention restarts now (see confirmedRecord). */
  private confirmOne({ key, owner, result }: KeyedClaim, ttlMs: number, now: number): Promise<boolean> {
    const expiresAt = now + ttlMs;
    const values: Record<string, AttributeValue> = {
      ':inflight': STATE_VALUE.inFlight,
      ':confirmed': STATE_VALUE.confirmed,
      ':owner': { S: owner },
      ':expiresAt': { N: String(expiresAt) },
      ':ttl': { N: String(ttlSeconds(expiresAt, now)) },
    };
    if (result !== undefined) values[':result'] = resultValue(result);
    return this.ifOwner(
      new UpdateItemCommand({
        TableName: this.#table,
        Key: keyOf(key, this.#ns),
        UpdateExpression: result === undefined ? CONFIRM_UPDATE : CONFIRM_RESULT_UPDATE,
        ConditionExpression: OWNER_CONDITION,
        ExpressionAttributeNames:
          result === undefined ? CONFIRM_NAMES : { ...CONFIRM_NAMES, '#result': ATTR.result },
        ExpressionAttributeValues: values,
      }),
    );
  }

  /**
   * Conditional update of the owner's in-flight claim: only its lease moves. The item's TTL attribute, set at the
   * claim to the later of lease and retention end, is left alone: a lease renewed past the retention (a handler
   * running longer than `ttlMs`) is still judged by the item's own times, and TTL deletion lags by hours.
   */
  protected override async doRenew(
    key: string,
    owner: string,
    leaseMs: number,
    now: number,
  ): Promise<boolean> {
    return this.ifOwner(
      new UpdateItemCommand({
        TableName: this.#table,
        Key: keyOf(key, this.#ns),
        UpdateExpression: 'SET #lease = :lease',
        ConditionExpression: OWNER_CONDITION,
        ExpressionAttributeNames: { ...OWNER_NAMES, '#lease': ATTR.lease },
        ExpressionAttributeValues: {
          ':inflight': STATE_VALUE.inFlight,
          ':owner': { S: owner },
          ':lease': { N: String(now + leaseMs) },
        },
      }),
    );
  }

  protected async doRemove(key: string, owner: string | undefined, _now: number): Promise<boolean> {
    if (owner !== undefined) {
      return this.ifOwner(
        new DeleteItemCommand({
          TableName: this.#table,
          Key: keyOf(key, this.#ns),
          ConditionExpression: OWNER_CONDITION,
          ExpressionAttributeNames: OWNER_NAMES,
          ExpressionAttributeValues: { ':inflight': STATE_VALUE.inFlight, ':owner': { S: owner } },
        }),
      );
    }
    const { Attributes } = await this.#client.send(
      new DeleteItemCommand({
        TableName: this.#table,
        Key: keyOf(key, this.#ns),
        ReturnValues: 'ALL_OLD',
      }),
    );
    return Attributes !== undefined;
  }

  /** Sends an owner-conditioned write: true when it applied, false when the claim was gone or someone else's. */
  private async ifOwner(command: UpdateItemCommand | DeleteItemCommand): Promise<boolean> {
    try {
      // The union is only for the caller's convenience; both commands send the same way.
      await this.#client.send(command as UpdateItemCommand);
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  /**
   * Deletes this namespace's items, and only them: a consistent Scan filtered on the namespace, deleted 25 at a time. It reads the whole
   * table, so it suits tests and maintenance rather than hot paths.
   */
  protected async doClear(): Promise<void> {
    let startKey: Item | undefined;
    do {
      const page = await this.#client.send(
        new ScanCommand({
          TableName: this.#table,
          ConsistentRead: true,
          ProjectionExpression: '#id',
          ExpressionAttributeNames: { '#id': ATTR.id },
          FilterExpression: 'begins_with(#id, :ns)',
          ExpressionAttributeValues: { ':ns': { S: this.#ns } },
          ExclusiveStartKey: startKey,
        }),
      );
      const keys = (page.Items ?? []).map((item) => ({ [ATTR.id]: item[ATTR.id] as Item[string] }));
      const deletes = keys.map((Key) => ({ DeleteRequest: { Key } }));
      await mapLimit(chunk(deletes, WRITE_CHUNK), this.#concurrency, (part) =>
        this.batchWrite(part, 'clear'),
      );
      startKey = page.LastEvaluatedKey;
    } while (startKey !== undefined);
  }

  /** A `Scan` of the table filtered to the namespace, as clear() does; see `IdempotentRepository.scan`. */
  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    let startKey: Item | undefined;
    do {
      const page = await this.run('scan', () =>
        this.#client.send(
          new ScanCommand({
            TableName: this.#table,
            ConsistentRead: true,
            ExpressionAttributeNames: { '#id': ATTR.id },
            FilterExpression: 'begins_with(#id, :ns)',
            ExpressionAttributeValues: { ':ns': { S: this.#ns } },
            ExclusiveStartKey: startKey,
          }),
        ),
      );
      const items = page.Items ?? [];
      if (items.length > 0) await onPage(items.map((item) => fromItem(item, this.#ns)));
      startKey = page.LastEvaluatedKey;
    } while (startKey !== undefined);
  }

  /** Sends up to 25 puts or deletes in one BatchWriteItem, retrying what DynamoDB leaves unprocessed with backoff. */
  private async batchWrite(requests: WriteRequest[], operation: string): Promise<void> {
    let pending = requests;
    for (let attempt = 0; ; attempt++) {
      const { UnprocessedItems } = await this.#client.send(
        new BatchWriteItemCommand({ RequestItems: { [this.#table]: pending } }),
      );
      pending = (UnprocessedItems?.[this.#table] ?? []) as WriteRequest[];
      if (pending.length === 0) return;
      if (attempt >= this.#maxRetries) {
        throw new RepositoryError(
          `dynamodb ${operation}: ${pending.length} writes still unprocessed after ${attempt + 1} BatchWriteItem attempts`,
        );
      }
      await backoff(attempt);
    }
  }

  protected async doClose(): Promise<void> {
    if (this.#ownsClient) this.#client.destroy();
  }
}

/** One request of a BatchWriteItem: a put or a delete. */
type WriteRequest =
  | { PutRequest: { Item: Record<string, AttributeValue> }; DeleteRequest?: undefined }
  | { DeleteRequest: { Key: Record<string, AttributeValue> }; PutRequest?: undefined };

/**
 * Measures the offset between our clock and the endpoint's (the `Date` header, whole seconds, compensated by the
 * round trip) and refuses or warns past `maxClockSkewMs`: claims compare times our clock wrote, since a DynamoDB
 * condition cannot read the server's time, so every worker's clock must agree with it.
 */
async function assertClock(
  client: DynamoDBClient,
  config: DynamoDbOptions,
  clock: () => number,
  logger: DynamoDbLogger,
  where: string,
): Promise<void> {
  const sample = await sampleServerClock(client, config.table, clock);
  if (sample === undefined) {
    logger.warn(`dynamodb: ${where} sent no Date header; the clock skew to it is not checked`);
    return;
  }
  checkClockSkew(offsetOf(sample), {
    store: 'dynamodb',
    where,
    maxClockSkewMs: config.maxClockSkewMs,
    onClockSkew: config.onClockSkew,
    warn: (message) => logger.warn(message),
  });
}

/**
 * The answer to a claim that met a live record. That record is usually someone else's; but when an earlier attempt
 * of this very put landed and only its answer was lost (a timeout, then the SDK's retry), the blocker is our own
 * claim: same owner token and same times. It is reported as added, so the caller does not wait out its own lease.
 */
function blockedBy(record: IdempotencyRecord, existing: IdempotencyRecord): AddResult {
  const own =
    record.owner !== undefined &&
    existing.owner === record.owner &&
    existing.state === record.state &&
    existing.leaseExpiresAt === record.leaseExpiresAt &&
    existing.expiresAt === record.expiresAt;
  return own ? { added: true, record } : { added: false, existing };
}

/**
 * The client built from config. `maxRetries` feeds the SDK's standard retry strategy, which already backs off on
 * throttling (ProvisionedThroughputExceededException, ThrottlingException, RequestLimitExceeded) and network errors.
 * `throwOnRequestTimeout` makes the timeout an error, not just a logged warning.
 */
function createClient(config: DynamoDbOptions): DynamoDBClient {
  const region = config.region ?? localFallbackRegion(config.endpoint);
  return new DynamoDBClient({
    ...(region !== undefined ? { region } : {}),
    ...(config.endpoint !== undefined ? { endpoint: config.endpoint } : {}),
    // A copy: the SDK writes into the credentials object it is given.
    ...(config.credentials !== undefined ? { credentials: { ...config.credentials } } : {}),
    maxAttempts: config.maxRetries + 1,
    requestHandler: {
      connectionTimeout: config.requestTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      throwOnRequestTimeout: true,
      httpAgent: { keepAlive: true, maxSockets: Math.max(50, config.batchConcurrency) },
      httpsAgent: { keepAlive: true, maxSockets: Math.max(50, config.batchConcurrency) },
    },
  });
}

/**
 * For a loopback endpoint (an emulator) without a configured region: the SDK's own chain, else a fixed region,
 * since the emulator needs one to sign with but ignores which. Undefined elsewhere: the SDK's chain alone decides.
 */
function localFallbackRegion(endpoint: string | undefined): (() => Promise<string>) | undefined {
  if (endpoint === undefined || !isLoopback(new URL(endpoint).hostname)) return undefined;
  return async () => {
    // A client built without a region resolves it through the SDK's default chain.
    const probe = new DynamoDBClient({});
    try {
      return await probe.config.region();
    } catch {
      return dynamodbDefaults.localEndpointRegion;
    } finally {
      probe.destroy();
    }
  };
}

function isLoopback(hostname: string): boolean {
  return hostname === 'localhost' || hostname === '[::1]' || hostname === '::1' || /^127\./.test(hostname);
}

/** The region the client will sign with, or a ConfigError naming `repository.region` when none resolves. */
async function resolveRegion(client: DynamoDBClient): Promise<string> {
  try {
    return await client.config.region();
  } catch (error) {
    throw new ConfigError(
      'repository.region',
      'no AWS region: set repository.region, or AWS_REGION, or a region in the AWS profile',
      { cause: error },
    );
  }
}

/** Default warning sink when no logger is given: a process warning, visible and filterable, never silent. */
const processWarnings: DynamoDbLogger = {
  warn: (message) => process.emitWarning(message, { code: 'IDEM_DYNAMODB' }),
};
