import type { types } from 'cassandra-driver';
import type { IdempotencyRecord } from '../../store/types.js';
import { recordOf } from '../shared.js';

/** A row as the driver returns it. */
export type Row = types.Row;

/** The record a row holds; undefined for no row, or a row whose cells have all expired (state is gone). */
export function decodeRow(key: string, row: Row | null | undefined): IdempotencyRecord | undefined {
  if (!row || (row.state !== 'in-flight' && row.state !== 'confirmed')) return undefined;
  return recordOf(key, row.state, toMs(row.expires_at) ?? 0, {
    leaseExpiresAt: toMs(row.lease_expires_at),
    owner: row.owner as string | null,
    eventTime: toMs(row.event_time),
    fingerprint: row.fingerprint as string | null,
    result: row.result as string | null,
    // Null on a row written by a version that did not keep it.
    firstSeenAt: toMs(row.first_seen_at),
  });
}

/** A bigint cell as epoch ms, whichever representation the client decodes to. */
export function toMs(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  return (value as types.Long).toNumber();
}
