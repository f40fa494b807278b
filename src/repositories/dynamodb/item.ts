import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { forgetAt } from '../../store/record.js';
import type { IdempotencyRecord, RecordState } from '../../store/types.js';
import { OPTIONAL_FIELDS, recordOf } from '../shared.js';

export type Item = Record<string, AttributeValue>;

/** `ttl` (epoch seconds) only lets the sweeper collect; liveness is by the ms times. */
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

/** Put in front of a stored `result`: DynamoDB Local and dynalite refuse an empty string. */
const RESULT_LEAD = '=';

export function resultValue(result: string): AttributeValue {
  return { S: RESULT_LEAD + result };
}

/** For condition expressions. */
export const STATE_VALUE = {
  inFlight: { S: 'in-flight' satisfies RecordState },
  confirmed: { S: 'confirmed' satisfies RecordState },
} as const;

/**
 * Epoch seconds after which the sweeper may delete the item. It runs on the wall clock: a record judged in event
 * time (`now`) is kept at least as long in wall time as it stays live.
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
 * The key text of a namespace: the prefix behind its UTF-8 byte length, `"app:"` → `"4:app:"`. Unlike a plain
 * `prefix + id` (`"app:"` + `"orders:42"` = `"app:orders:"` + `"42"`), every key splits back into one prefix and
 * one id, so `begins_with(namespace)` matches one namespace's keys alone.
 */
export function namespaceOf(keyPrefix: string): string {
  return `${Buffer.byteLength(keyPrefix, 'utf8')}:${keyPrefix}`;
}

/** The sweeper may delete it after `forgetAt(record)` (so a slow owner can confirm), not within `minLifetimeMs`. */
export function toItem(record: IdempotencyRecord, namespace: string, now: number, minLifetimeMs = 0): Item {
  const item: Item = {
    [ATTR.id]: { S: namespace + record.id },
    [ATTR.state]: { S: record.state },
    [ATTR.expiresAt]: { N: String(record.expiresAt) },
    [ATTR.ttl]: { N: String(ttlSeconds(forgetAt(record), now, Date.now(), minLifetimeMs)) },
  };
  for (const [field, kind] of OPTIONAL_FIELDS) {
    const value = record[field];
    if (value === undefined) continue;
    item[field] =
      kind === 'time' ? { N: String(value) } : { S: (field === 'result' ? RESULT_LEAD : '') + value };
  }
  return item;
}

export function fromItem(item: Item, namespace: string): IdempotencyRecord {
  const cells: Record<string, string | number | undefined> = {};
  for (const [field, kind] of OPTIONAL_FIELDS) {
    const value = item[field];
    cells[field] = kind === 'text' ? value?.S : value?.N === undefined ? undefined : Number(value.N);
  }
  cells.result = (cells.result as string | undefined)?.slice(RESULT_LEAD.length);
  const id = (item[ATTR.id]?.S ?? '').slice(namespace.length);
  const state = item[ATTR.state]?.S === STATE_VALUE.inFlight.S ? 'in-flight' : 'confirmed';
  return recordOf(id, state, Number(item[ATTR.expiresAt]?.N ?? 0), cells);
}

export function keyOf(key: string, namespace: string): Item {
  return { [ATTR.id]: { S: namespace + key } };
}
