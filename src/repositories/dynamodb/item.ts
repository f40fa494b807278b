import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { forgetAt } from '../../store/record.js';
import type { IdempotencyRecord, RecordState } from '../../store/types.js';

/** A DynamoDB item as the low-level client sees it. */
export type Item = Record<string, AttributeValue>;

/**
 * Attribute names of a record item. `ttl` is epoch SECONDS for DynamoDB's TTL sweeper; it only
 * garbage-collects, liveness is always decided from `expiresAt`/`leaseExpiresAt` (ms).
 */
export const ATTR = {
  id: 'id',
  state: 'state',
  expiresAt: 'expiresAt',
  lease: 'leaseExpiresAt',
  owner: 'owner',
  eventTime: 'eventTime',
  fingerprint: 'fingerprint',
  result: 'result',
  firstSeenAt: 'firstSeenAt',
  ttl: 'ttl',
} as const;

/**
 * The `result` attribute is the result behind this one character, so an empty result is a non-empty string
 * (DynamoDB Local and dynalite refuse empty strings that DynamoDB itself now accepts).
 */
const RESULT_LEAD = '=';

/** The stored form of a result (see {@link ATTR}). */
export function resultValue(result: string): AttributeValue {
  return { S: RESULT_LEAD + result };
}

/** Values of the `state` attribute (the record's own state names), for condition expressions. */
export const STATE_VALUE = {
  inFlight: { S: 'in-flight' satisfies RecordState },
  confirmed: { S: 'confirmed' satisfies RecordState },
} as const;

/**
 * Epoch seconds after which DynamoDB's sweeper may delete the item, rounded up so it never goes early. The sweeper
 * runs on the wall clock, so when liveness is judged in another time (`now`, e.g. stream time in event-time mode)
 * the record is kept at least as long in wall time as it stays live in that time.
 */
export function ttlSeconds(
  forget: number,
  now: number,
  wallNow: number = Date.now(),
  minLifetimeMs = 0,
): number {
  return Math.ceil(Math.max(forget, wallNow + Math.max(forget - now, minLifetimeMs)) / 1000);
}

/**
 * The key text of a namespace: the prefix behind its UTF-8 byte length, `"app:"` → `"4:app:"`. Stored keys are
 * `namespace + id`; reading the length first splits any key back into one prefix and one id, so two namespaces
 * never share a key (plain `prefix + id` would merge `"app:"` + `"orders:42"` with `"app:orders:"` + `"42"`), and
 * `begins_with(namespace)` matches exactly one prefix's keys, so clear() never reaches another namespace.
 */
export function namespaceOf(keyPrefix: string): string {
  return `${Buffer.byteLength(keyPrefix, 'utf8')}:${keyPrefix}`;
}

/**
 * The full item for a record written at `now`, its id stored behind the repository's namespace. The sweeper may
 * delete it after `forgetAt(record)` (for a claim: its retention end, so a slow owner can still confirm it), and
 * never within `minLifetimeMs` of wall time (see `AddOptions.minLifetimeMs`).
 */
export function toItem(record: IdempotencyRecord, namespace: string, now: number, minLifetimeMs = 0): Item {
  const item: Item = {
    [ATTR.id]: { S: namespace + record.id },
    [ATTR.state]: { S: record.state },
    [ATTR.expiresAt]: { N: String(record.expiresAt) },
    [ATTR.ttl]: { N: String(ttlSeconds(forgetAt(record), now, Date.now(), minLifetimeMs)) },
  };
  if (record.leaseExpiresAt !== undefined) item[ATTR.lease] = { N: String(record.leaseExpiresAt) };
  if (record.owner !== undefined) item[ATTR.owner] = { S: record.owner };
  if (record.eventTime !== undefined) item[ATTR.eventTime] = { N: String(record.eventTime) };
  if (record.fingerprint !== undefined) item[ATTR.fingerprint] = { S: record.fingerprint };
  if (record.result !== undefined) item[ATTR.result] = resultValue(record.result);
  if (record.firstSeenAt !== undefined) item[ATTR.firstSeenAt] = { N: String(record.firstSeenAt) };
  return item;
}

/** The record an item holds, with the namespace taken off its id. */
export function fromItem(item: Item, namespace: string): IdempotencyRecord {
  const lease = item[ATTR.lease]?.N;
  const owner = item[ATTR.owner]?.S;
  const eventTime = item[ATTR.eventTime]?.N;
  const fingerprint = item[ATTR.fingerprint]?.S;
  const result = item[ATTR.result]?.S?.slice(RESULT_LEAD.length);
  // Absent on an item written by a version that did not keep it.
  const firstSeenAt = item[ATTR.firstSeenAt]?.N;
  return {
    id: (item[ATTR.id]?.S ?? '').slice(namespace.length),
    state: item[ATTR.state]?.S === STATE_VALUE.inFlight.S ? 'in-flight' : 'confirmed',
    expiresAt: Number(item[ATTR.expiresAt]?.N ?? 0),
    ...(lease !== undefined ? { leaseExpiresAt: Number(lease) } : {}),
    ...(owner !== undefined ? { owner } : {}),
    ...(eventTime !== undefined ? { eventTime: Number(eventTime) } : {}),
    ...(fingerprint !== undefined ? { fingerprint } : {}),
    ...(result !== undefined ? { result } : {}),
    ...(firstSeenAt !== undefined ? { firstSeenAt: Number(firstSeenAt) } : {}),
  };
}

/** The primary key of an id in a namespace (see {@link namespaceOf}). */
export function keyOf(key: string, namespace: string): Item {
  return { [ATTR.id]: { S: namespace + key } };
}
