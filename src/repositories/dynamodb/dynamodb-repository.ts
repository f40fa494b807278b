import { setTimeout as sleep } from 'node:timers/promises';
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
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { ConfigError, RepositoryError } from '../../errors.js';
import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../../store/base.js';
import { isLive, newRecord } from '../../store/record.js';
import type { AddOptions, AddResult, IdempotencyRecord, MarkOptions } from '../../store/types.js';
import { mapLimit } from '../../util/concurrency.js';
import { checkSampledClock } from '../clock-skew.js';
import { chunk, ifLive, isSameClaim, processWarnings, sharedStoreCapabilities } from '../shared.js';
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
/** Backoff between batch retries: exponential with full jitter, as AWS recommends. */
const BACKOFF_BASE_MS = 25;
const BACKOFF_CAP_MS = 2_000;
/** Claim attempts when the record changes between a failed put and the emulator's fallback read. */
const CLAIM_ATTEMPTS = 5;
const BLOCKED = Symbol('blocked');

/** A claim succeeds when the id is absent or its record is no longer live (`<= now`, as {@link isLive}). */
const CLAIM_CONDITION =
  'attribute_not_exists(#id) OR (#state = :confirmed AND #expiresAt <= :now) OR (#state = :inflight AND #lease <= :now)';
const CLAIM_NAMES = {
  '#id': ATTR.id,
  '#state': ATTR.state,
  '#expiresAt': ATTR.expiresAt,
  '#lease': ATTR.lease,
};

/** Only the owner's in-flight record may be confirmed, renewed or released. */
const OWNER_CONDITION = '#state = :inflight AND #owner = :owner';
const OWNER_NAMES = { '#state': ATTR.state, '#owner': ATTR.owner };

const CONFIRM_UPDATE = 'SET #state = :confirmed, #expiresAt = :expiresAt, #ttl = :ttl REMOVE #lease, #owner';

const CONFIRM_RESULT_UPDATE = CONFIRM_UPDATE.replace(' REMOVE', ', #result = :result REMOVE');
const CONFIRM_NAMES = {
  '#expiresAt': ATTR.expiresAt,
  '#ttl': ATTR.ttl,
  '#lease': ATTR.lease,
};
const CONFIRM_RESULT_NAMES = { ...CONFIRM_NAMES, '#result': ATTR.result };

/**
 * Repository on a DynamoDB table (partition key `id`, string), as Powertools (docs/dynamodb.md): a claim is ONE
 * conditional PutItem that returns the blocking record (ALL_OLD), or a consistent read where an emulator does not
 * (dynalite). Reads check expiry themselves: TTL deletion lags by up to 48 hours. Conditions compare times of
 * each worker's clock, so `open` checks the skew. Lazy marks are blind puts: their races are not counted.
 */
export class DynamoDbRepository extends BaseRepository {
  // Claims are one conditional put per id: DynamoDB has no conditional batch write. An item is at most 400 KB
  // (409600 bytes) with every attribute name and value; the key, times, owner and fingerprint fit in the rest.
  readonly capabilities = sharedStoreCapabilities({ nativeBatch: false, maxResultBytes: 400_000 });
  protected readonly storeName = 'dynamodb';
  readonly #client: DynamoDBClient;
  readonly #ownsClient: boolean;
  readonly #table: string;
  /** In front of every id (see namespaceOf). */
  readonly #ns: string;
  readonly #concurrency: number;
  readonly #maxRetries: number;
  #returnsOldItem: boolean | undefined;

  /** Connects and checks (or creates) the table; a setup that cannot work is a ConfigError. */
  static async open(options: DynamoDbRepositoryOptions): Promise<DynamoDbRepository> {
    const { client, logger, clock, ...rest } = options;
    const config = parseDynamoDbOptions(rest);
    const repo = new DynamoDbRepository(config, client, clock);
    try {
      const region = client === undefined ? await resolveRegion(repo.#client) : undefined;
      const endpoint =
        client !== undefined
          ? 'the endpoint of the given client'
          : (config.endpoint ?? `the AWS endpoint of region ${region}`);
      const warnings = logger ?? processWarnings('IDEM_DYNAMODB');
      await ensureTable(repo.#client, config, warnings, endpoint);
      const sample = await sampleServerClock(repo.#client, config.table, clock ?? Date.now);
      const check = { ...config, store: 'dynamodb', where: endpoint, warn: (m: string) => warnings.warn(m) };
      checkSampledClock([sample], check, `${endpoint} sent no Date header`);
    } catch (error) {
      await repo.close();
      throw error;
    }
    return repo;
  }

  private constructor(config: DynamoDbOptions, client?: DynamoDBClient, clock?: () => number) {
    super({ clock });
    this.#ownsClient = client === undefined;
    this.#client = client ?? createClient(config);
    this.#table = config.table;
    this.#ns = namespaceOf(config.keyPrefix);
    this.#concurrency = config.batchConcurrency;
    this.#maxRetries = config.maxRetries;
  }

  /** Whether a failed conditional put returns the blocking item (DynamoDB: yes, dynalite: no); undefined until seen. */
  get returnsItemOnConditionFailure(): boolean | undefined {
    return this.#returnsOldItem;
  }

  protected async doAddMany(entries: readonly KeyedEntry[], options: AddOptions, now: number) {
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
      const ids = blocked.map((i) => (records[i] as IdempotencyRecord).id);
      const existing = await this.doGetMany(ids, now);
      pending = [];
      blocked.forEach((i, k) => {
        const found = existing[k];
        if (found !== undefined) results[i] = blockedBy(records[i] as IdempotencyRecord, found);
        else pending.push(i);
      });
      if (pending.length === 0) return results;
      // Gives up on ids whose record keeps flipping between the failed put and the read-back.
      if (attempt === CLAIM_ATTEMPTS) {
        const first = JSON.stringify((records[pending[0] as number] as IdempotencyRecord).id);
        const more = pending.length > 1 ? ` (and ${pending.length - 1} more)` : '';
        throw new RepositoryError(
          `dynamodb add: the record of ${first}${more} changed under ${CLAIM_ATTEMPTS} claim attempts`,
        );
      }
    }
  }

  protected override async doMarkMany(entries: readonly KeyedEntry[], options: MarkOptions, now: number) {
    const { minLifetimeMs } = options;
    const item = (e: KeyedEntry) => toItem(newRecord(e.key, e, options, now), this.#ns, now, minLifetimeMs);
    const puts = entries.map((e) => ({ PutRequest: { Item: item(e) } }));
    await this.batchWrite(puts, 'mark');
    return entries.map(() => true);
  }

  /** A failed put answers the live record that blocked it, or BLOCKED where the endpoint does not (dynalite). */
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

  protected async doGetMany(keys: readonly string[], now: number) {
    // TTL deletion lags: every record read is judged live or not here.
    if (keys.length === 1) {
      const Key = keyOf(keys[0] as string, this.#ns);
      const { Item } = await this.#client.send(
        new GetItemCommand({ TableName: this.#table, Key, ConsistentRead: true }),
      );
      return [Item === undefined ? undefined : ifLive(fromItem(Item, this.#ns), now)];
    }
    const found = new Map<string, IdempotencyRecord>();
    const keyItems = keys.map((key) => keyOf(key, this.#ns));
    await mapLimit(chunk(keyItems, GET_CHUNK), this.#concurrency, (part) =>
      this.untilProcessed('get', 'keys', 'BatchGetItem', part, async (Keys) => {
        const out = await this.#client.send(
          new BatchGetItemCommand({ RequestItems: { [this.#table]: { Keys, ConsistentRead: true } } }),
        );
        for (const item of out.Responses?.[this.#table] ?? []) {
          const record = fromItem(item, this.#ns);
          if (isLive(record, now)) found.set(record.id, record);
        }
        return out.UnprocessedKeys?.[this.#table]?.Keys ?? [];
      }),
    );
    return keys.map((key) => found.get(key));
  }

  /** Sends a batch call until DynamoDB leaves nothing unprocessed, with backoff, at most `maxRetries` times more. */
  private async untilProcessed<T>(
    operation: string,
    unit: string,
    command: string,
    requests: T[],
    send: (pending: T[]) => Promise<T[]>,
  ): Promise<void> {
    let pending = requests;
    for (let attempt = 0; ; attempt++) {
      pending = await send(pending);
      if (pending.length === 0) return;
      if (attempt >= this.#maxRetries) {
        throw new RepositoryError(
          `dynamodb ${operation}: ${pending.length} ${unit} still unprocessed after ${attempt + 1} ${command} attempts`,
        );
      }
      await sleep(Math.random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt));
    }
  }

  protected doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number, now: number): Promise<boolean[]> {
    return mapLimit(claims, this.#concurrency, (claim) => this.confirmOne(claim, ttlMs, now));
  }

  /** Retention restarts now (see confirmedRecord). */
  private confirmOne({ key, owner, result }: KeyedClaim, ttlMs: number, now: number): Promise<boolean> {
    const expiresAt = now + ttlMs;
    const values: Record<string, AttributeValue> = {
      ':confirmed': STATE_VALUE.confirmed,
      ':expiresAt': { N: String(expiresAt) },
      ':ttl': { N: String(ttlSeconds(expiresAt, now)) },
    };
    if (result === undefined) return this.ifOwner(key, owner, CONFIRM_UPDATE, CONFIRM_NAMES, values);
    values[':result'] = resultValue(result);
    return this.ifOwner(key, owner, CONFIRM_RESULT_UPDATE, CONFIRM_RESULT_NAMES, values);
  }

  /** Only the lease moves: a lease past the TTL attribute is still judged by the item's times (TTL lags by hours). */
  protected override async doRenew(key: string, owner: string, leaseMs: number, now: number) {
    const lease = { ':lease': { N: String(now + leaseMs) } };
    return this.ifOwner(key, owner, 'SET #lease = :lease', { '#lease': ATTR.lease }, lease);
  }

  protected async doRemove(key: string, owner: string | undefined): Promise<boolean> {
    if (owner !== undefined) return this.ifOwner(key, owner);
    const { Attributes } = await this.#client.send(
      new DeleteItemCommand({
        TableName: this.#table,
        Key: keyOf(key, this.#ns),
        ReturnValues: 'ALL_OLD',
      }),
    );
    return Attributes !== undefined;
  }

  /** Updates (with `update`) or deletes the owner's in-flight record: false when gone or someone else's. */
  private async ifOwner(
    key: string,
    owner: string,
    update?: string,
    names: Record<string, string> = {},
    values: Record<string, AttributeValue> = {},
  ): Promise<boolean> {
    const input = {
      TableName: this.#table,
      Key: keyOf(key, this.#ns),
      ConditionExpression: OWNER_CONDITION,
      ExpressionAttributeNames: { ...OWNER_NAMES, ...names },
      ExpressionAttributeValues: { ':inflight': STATE_VALUE.inFlight, ':owner': { S: owner }, ...values },
      UpdateExpression: update,
    };
    try {
      if (update === undefined) await this.#client.send(new DeleteItemCommand(input));
      else await this.#client.send(new UpdateItemCommand(input));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  /** A Scan of the whole table: this namespace's items only. */
  protected async doClear(): Promise<void> {
    await this.scanNamespace('clear', true, async (items) => {
      const deletes = items.map((item) => ({
        DeleteRequest: { Key: { [ATTR.id]: item[ATTR.id] as Item[string] } },
      }));
      await this.batchWrite(deletes, 'clear');
    });
  }

  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    await this.scanNamespace('scan', false, (items) => onPage(items.map((item) => fromItem(item, this.#ns))));
  }

  /** Pages of a consistent Scan filtered to this namespace. */
  private async scanNamespace(
    operation: string,
    idsOnly: boolean,
    onItems: (items: Item[]) => void | Promise<void>,
  ): Promise<void> {
    let startKey: Item | undefined;
    do {
      const page = await this.run(operation, () =>
        this.#client.send(
          new ScanCommand({
            TableName: this.#table,
            ConsistentRead: true,
            ...(idsOnly ? { ProjectionExpression: '#id' } : {}),
            ExpressionAttributeNames: { '#id': ATTR.id },
            FilterExpression: 'begins_with(#id, :ns)',
            ExpressionAttributeValues: { ':ns': { S: this.#ns } },
            ExclusiveStartKey: startKey,
          }),
        ),
      );
      const items = page.Items ?? [];
      if (items.length > 0) await onItems(items);
      startKey = page.LastEvaluatedKey;
    } while (startKey !== undefined);
  }

  private async batchWrite(requests: WriteRequest[], operation: string): Promise<void> {
    await mapLimit(chunk(requests, WRITE_CHUNK), this.#concurrency, (part) =>
      this.untilProcessed(operation, 'writes', 'BatchWriteItem', part, async (pending) => {
        const out = await this.#client.send(
          new BatchWriteItemCommand({ RequestItems: { [this.#table]: pending } }),
        );
        return out.UnprocessedItems?.[this.#table] ?? [];
      }),
    );
  }

  protected async doClose(): Promise<void> {
    if (this.#ownsClient) this.#client.destroy();
  }
}

/**
 * A claim that met a live record: our own when an earlier attempt of this put landed and only its answer was lost
 * (the SDK's retry), then reported as added so the caller does not wait out its own lease.
 */
function blockedBy(record: IdempotencyRecord, existing: IdempotencyRecord): AddResult {
  const own = record.owner !== undefined && isSameClaim(existing, record);
  return own ? { added: true, record } : { added: false, existing };
}

/** `throwOnRequestTimeout`: a timeout is an error, not just a logged warning. */
function createClient(config: DynamoDbOptions): DynamoDBClient {
  const region = config.region ?? localFallbackRegion(config.endpoint);
  const agent = { keepAlive: true, maxSockets: Math.max(50, config.batchConcurrency) };
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
      httpAgent: agent,
      httpsAgent: agent,
    },
  });
}

/** For a loopback endpoint (an emulator, which ignores the region it needs to sign): the SDK's chain, else a fixed one. */
function localFallbackRegion(endpoint: string | undefined): (() => Promise<string>) | undefined {
  const host = endpoint === undefined ? '' : new URL(endpoint).hostname;
  if (!/^(localhost|\[::1\]|::1|127\..*)$/.test(host)) return undefined;
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
