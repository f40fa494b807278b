import type { types } from 'cassandra-driver';
import type { IdempotencyRecord } from '../../store/types.js';

/** A row as the driver returns it. */
export type Row = types.Row;

/** The record a row holds; undefined for no row, or a row whose cells have all expired (state is gone). */
export function decodeRow(key: string, row: Row | null | undefined): IdempotencyRecord | undefined {
  if (!row || (row.state !== 'in-flight' && row.state !== 'confirmed')) return undefined;
  const lease = toMs(row.lease_expires_at);
  const eventTime = toMs(row.event_time);
  // Null on a row written by a version that did not keep it.
  const firstSeenAt = toMs(row.first_seen_at);
  return {
    id: key,
    state: row.state,
    expiresAt: toMs(row.expires_at) ?? 0,
    ...(lease !== undefined ? { leaseExpiresAt: lease } : {}),
    ...(row.owner != null ? { owner: row.owner as string } : {}),
    ...(eventTime !== undefined ? { eventTime } : {}),
    ...(row.fingerprint != null ? { fingerprint: row.fingerprint as string } : {}),
    ...(row.result != null ? { result: row.result as string } : {}),
    ...(firstSeenAt !== undefined ? { firstSeenAt } : {}),
  };
}

/** A bigint cell as epoch ms, whichever representation the client decodes to. */
export function toMs(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  return (value as types.Long).toNumber();
}

/** True when a stored record is exactly the claim we tried to write (our own timed-out write that landed). */
export function isSameClaim(stored: IdempotencyRecord, ours: IdempotencyRecord): boolean {
  return (
    stored.state === ours.state &&
    stored.owner === ours.owner &&
    stored.expiresAt === ours.expiresAt &&
    stored.leaseExpiresAt === ours.leaseExpiresAt
  );
}
