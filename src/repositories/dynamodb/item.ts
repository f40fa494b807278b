import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { forgetAt } from '../record.js';
import type { IdempotencyRecord, RecordState } from '../types.js';

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
  ttl: 'ttl',
} as const;

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
export function ttlSeconds(forget: number, now: number, wallNow: number = Date.now()): number {
  return Math.ceil(Math.max(forget, wallNow + (forget - now)) / 1000);
}

/** The full item for a record written at `now`, its id stored behind the repository's key prefix. */
export function toItem(record: IdempotencyRecord, keyPrefix: string, now: number): Item {
  const item: Item = {
    [ATTR.id]: { S: keyPrefix + record.id },
    [ATTR.state]: { S: record.state },
    [ATTR.expiresAt]: { N: String(record.expiresAt) },
    [ATTR.ttl]: { N: String(ttlSeconds(forgetAt(record), now)) },
  };
  if (record.leaseExpiresAt !== undefined) item[ATTR.lease] = { N: String(record.leaseExpiresAt) };
  if (record.owner !== undefined) item[ATTR.owner] = { S: record.owner };
  if (record.eventTime !== undefined) item[ATTR.eventTime] = { N: String(record.eventTime) };
  if (record.fingerprint !== undefined) item[ATTR.fingerprint] = { S: record.fingerprint };
  return item;
}

/** The record an item holds, with the key prefix taken off its id. */
export function fromItem(item: Item, keyPrefix: string): IdempotencyRecord {
  const lease = item[ATTR.lease]?.N;
  const owner = item[ATTR.owner]?.S;
  const eventTime = item[ATTR.eventTime]?.N;
  const fingerprint = item[ATTR.fingerprint]?.S;
  return {
    id: (item[ATTR.id]?.S ?? '').slice(keyPrefix.length),
    state: item[ATTR.state]?.S === STATE_VALUE.inFlight.S ? 'in-flight' : 'confirmed',
    expiresAt: Number(item[ATTR.expiresAt]?.N ?? 0),
    ...(lease !== undefined ? { leaseExpiresAt: Number(lease) } : {}),
    ...(owner !== undefined ? { owner } : {}),
    ...(eventTime !== undefined ? { eventTime: Number(eventTime) } : {}),
    ...(fingerprint !== undefined ? { fingerprint } : {}),
  };
}

/** The primary key of an id. */
export function keyOf(key: string, keyPrefix: string): Item {
  return { [ATTR.id]: { S: keyPrefix + key } };
}
