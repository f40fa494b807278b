import type { AddEntry, AddOptions, IdempotencyRecord } from './types.js';

/** True while the record still counts: in-flight until its lease ends, confirmed until it expires. */
export function isLive(record: IdempotencyRecord, now: number): boolean {
  if (record.state === 'in-flight') return (record.leaseExpiresAt ?? 0) > now;
  return record.expiresAt > now;
}

/** The record `add` writes for a new id. */
export function newRecord(
  key: string,
  entry: Omit<AddEntry, 'id'>,
  options: AddOptions,
  now: number,
): IdempotencyRecord {
  const claim = options.leaseMs !== undefined;
  return {
    id: key,
    state: claim ? 'in-flight' : 'confirmed',
    expiresAt: now + options.ttlMs,
    ...(claim ? { leaseExpiresAt: now + (options.leaseMs as number), owner: options.owner } : {}),
    ...(entry.eventTime !== undefined ? { eventTime: entry.eventTime } : {}),
    ...(entry.fingerprint !== undefined ? { fingerprint: entry.fingerprint } : {}),
  };
}

/** The record after its owner confirms it: retention restarts from the confirmation. */
export function confirmedRecord(record: IdempotencyRecord, ttlMs: number, now: number): IdempotencyRecord {
  const confirmed: { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] } = {
    id: record.id,
    state: 'confirmed',
    expiresAt: now + ttlMs,
  };
  if (record.eventTime !== undefined) confirmed.eventTime = record.eventTime;
  if (record.fingerprint !== undefined) confirmed.fingerprint = record.fingerprint;
  return confirmed;
}

/** The time after which the store may forget the record entirely (used for store-side TTLs and buckets). */
export function forgetAt(record: IdempotencyRecord): number {
  return record.state === 'in-flight' ? (record.leaseExpiresAt ?? record.expiresAt) : record.expiresAt;
}

const SEP = '\u0001';

/**
 * Compact text form for key-value stores (Redis, RocksDB): fields joined by U+0001.
 * Order: state, expiresAt, leaseExpiresAt, owner, eventTime, fingerprint.
 */
export function encodeRecord(record: IdempotencyRecord): string {
  return [
    record.state === 'in-flight' ? 'f' : 'c',
    record.expiresAt,
    record.leaseExpiresAt ?? '',
    record.owner ?? '',
    record.eventTime ?? '',
    record.fingerprint ?? '',
  ].join(SEP);
}

/** Inverse of {@link encodeRecord}. */
export function decodeRecord(key: string, text: string): IdempotencyRecord {
  const [state, expiresAt, lease, owner, eventTime, fingerprint] = text.split(SEP);
  return {
    id: key,
    state: state === 'f' ? 'in-flight' : 'confirmed',
    expiresAt: Number(expiresAt),
    ...(lease ? { leaseExpiresAt: Number(lease) } : {}),
    ...(owner ? { owner } : {}),
    ...(eventTime ? { eventTime: Number(eventTime) } : {}),
    ...(fingerprint ? { fingerprint } : {}),
  };
}
