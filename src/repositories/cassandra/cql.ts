import { createHash } from 'node:crypto';
import type { types } from 'cassandra-driver';
import { ConfigError } from '../../errors.js';
import type { IdempotencyRecord } from '../../store/types.js';
import { OPTIONAL_FIELDS, recordOf } from '../shared.js';
import { IDENTIFIER_PATTERN } from './options.js';

/**
 * Every CQL statement, and the layout (docs/cassandra.md): `PRIMARY KEY ((ns, bucket), id)`, `bucket` a stable hash
 * of the id, so clear() is {@link BUCKETS} partition deletes instead of a scan that fails on tombstones. Only the
 * checked keyspace, table and replication map are spliced in.
 */

/** Buckets per namespace. Part of the table's data layout: changing it would hide every existing row. */
export const BUCKETS = 1024;

/** Every column with its CQL type and role, as `createSchema` makes it. */
export const COLUMNS = {
  ns: { type: 'text', kind: 'partition_key' },
  bucket: { type: 'int', kind: 'partition_key' },
  id: { type: 'text', kind: 'clustering' },
  state: { type: 'text', kind: 'regular' },
  expires_at: { type: 'bigint', kind: 'regular' },
  lease_expires_at: { type: 'bigint', kind: 'regular' },
  owner: { type: 'text', kind: 'regular' },
  event_time: { type: 'bigint', kind: 'regular' },
  fingerprint: { type: 'text', kind: 'regular' },
  result: { type: 'text', kind: 'regular' },
  first_seen_at: { type: 'bigint', kind: 'regular' },
} as const;

/** Columns an older table lacks: `createSchema` adds them, else the layout check names the ALTER to run. */
export const ADDED_COLUMNS: readonly (keyof typeof COLUMNS)[] = ['result', 'first_seen_at'];

export function addColumnStatement(keyspace: string, table: string, column: keyof typeof COLUMNS): string {
  const t = `${quoteIdentifier(keyspace, 'repository.keyspace')}.${quoteIdentifier(table, 'repository.table')}`;
  return `ALTER TABLE ${t} ADD ${column} ${COLUMNS[column].type}`;
}

/** Columns after the primary key, in bind order. */
const RECORD_COLUMNS = Object.keys(COLUMNS).slice(3).join(', ');

/** Tombstones (deletes, expired TTLs) are purged after an hour instead of ten days: this table churns. */
const GC_GRACE_SECONDS = 3600;

/** Row TTLs are capped at ten years (older SSTable formats reject expirations past 2038); `expires_at` stays exact. */
const MAX_TTL_SECONDS = 10 * 365 * 24 * 3600;

/** The first 32 bits of the key's MD5: any client in any language finds the same row. */
export function bucketOf(key: string): number {
  return createHash('md5').update(key, 'utf8').digest().readUInt32BE(0) % BUCKETS;
}

/** Double-quoted (case kept, reserved words allowed), or a ConfigError naming `key`. */
function quoteIdentifier(name: string, key: string): string {
  if (!IDENTIFIER_PATTERN.test(name)) {
    throw new ConfigError(key, `${JSON.stringify(name)} is not a valid identifier (${IDENTIFIER_PATTERN})`);
  }
  return `"${name}"`;
}

/** Keys and values are checked again: they are spliced into DDL. */
function replicationLiteral(replication: Readonly<Record<string, string | number>>): string {
  if (typeof replication.class !== 'string')
    throw new ConfigError('repository.replication', 'needs a "class"');
  return `{${Object.entries(replication)
    .map(([key, value]) => {
      if (!/^[A-Za-z0-9_.-]{1,64}$/.test(key) || !/^[A-Za-z0-9_.-]{1,128}$/.test(String(value))) {
        throw new ConfigError(`repository.replication.${key}`, 'only letters, digits, _ . - are allowed');
      }
      return `'${key}': '${value}'`;
    })
    .join(', ')}}`;
}

export function schemaStatements(
  keyspace: string,
  table: string,
  replication: Readonly<Record<string, string | number>>,
): string[] {
  const ks = quoteIdentifier(keyspace, 'repository.keyspace');
  const columns = Object.entries(COLUMNS)
    .map(([name, { type }]) => `${name} ${type}`)
    .join(', ');
  return [
    `CREATE KEYSPACE IF NOT EXISTS ${ks} WITH replication = ${replicationLiteral(replication)}`,
    `CREATE TABLE IF NOT EXISTS ${ks}.${quoteIdentifier(table, 'repository.table')} (
      ${columns}, PRIMARY KEY ((ns, bucket), id)
    ) WITH gc_grace_seconds = ${GC_GRACE_SECONDS}
      AND comment = 'idempotent-consumer ids; rows expire by USING TTL, liveness is judged by expires_at'`,
  ];
}

export function statements(keyspace: string, table: string) {
  const t = `${quoteIdentifier(keyspace, 'repository.keyspace')}.${quoteIdentifier(table, 'repository.table')}`;
  const row = 'WHERE ns = ? AND bucket = ? AND id = ?';
  const setAll = RECORD_COLUMNS.replaceAll(',', ' = ?,') + ' = ?';
  const marks = Object.keys(COLUMNS)
    .map(() => '?')
    .join(', ');
  const insert = `INSERT INTO ${t} (ns, bucket, id, ${RECORD_COLUMNS}) VALUES (${marks})`;
  return {
    select: `SELECT ${RECORD_COLUMNS} FROM ${t} ${row}`,
    // Several ids of one bucket.
    selectIn: `SELECT id, ${RECORD_COLUMNS} FROM ${t} WHERE ns = ? AND bucket = ? AND id IN ?`,
    // Eager claim: an LWT that returns the existing row when not applied.
    claim: `${insert} IF NOT EXISTS USING TTL ?`,
    // Takeover of a row our clock says is expired, by compare-and-set on the values read. Every column is set
    // (nulls included): an UPDATE's TTL covers only the cells it writes.
    takeover: `UPDATE ${t} USING TTL ? SET ${setAll} ${row}
      IF state = ? AND owner = ? AND expires_at = ? AND lease_expires_at = ?`,
    // Lazy mark: a plain write (lazy mode accepts concurrent duplicates, so no Paxos round).
    mark: `${insert} USING TTL ?`,
    // Confirm (or renew) of the caller's claim. The lease and expiry pin the exact claim whose event_time and
    // fingerprint were read and are rewritten here; when not applied, they tell a timed-out confirm if it landed.
    confirm: `UPDATE ${t} USING TTL ? SET ${setAll} ${row}
      IF state = 'in-flight' AND owner = ? AND lease_expires_at = ? AND expires_at = ?`,
    removeOwned: `DELETE FROM ${t} ${row} IF state = 'in-flight' AND owner = ?`,
    // Any record of the key: an LWT too, ordered with the claims and confirms it may race.
    remove: `DELETE FROM ${t} ${row} IF EXISTS`,
    // One bucket of a namespace: clear() deletes it, scan() reads it a page at a time.
    removeBucket: `DELETE FROM ${t} WHERE ns = ? AND bucket = ?`,
    scanBucket: `SELECT id, ${RECORD_COLUMNS} FROM ${t} WHERE ns = ? AND bucket = ?`,
  };
}

export type Statements = ReturnType<typeof statements>;

/** A record's store-side TTL in whole seconds, rounded up, at least 1, at most {@link MAX_TTL_SECONDS}. */
export function ttlSeconds(forgetAtMs: number, now: number): number {
  return Math.min(MAX_TTL_SECONDS, Math.max(1, Math.ceil((forgetAtMs - now) / 1000)));
}

export type Row = types.Row;

/** `leaseExpiresAt` → `lease_expires_at`. */
const FIELD_COLUMNS = OPTIONAL_FIELDS.map(
  ([field, kind]) => [field, kind, field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] as const,
);

/** The record a row holds; undefined for no row, or a row whose cells have all expired (state is gone). */
export function decodeRow(key: string, row: Row | null | undefined): IdempotencyRecord | undefined {
  if (!row || (row.state !== 'in-flight' && row.state !== 'confirmed')) return undefined;
  const cells: Record<string, unknown> = {};
  // A column added later (result, first_seen_at) is null on a row written by a version that did not keep it.
  for (const [field, kind, column] of FIELD_COLUMNS)
    cells[field] = kind === 'time' ? toMs(row[column]) : row[column];
  return recordOf(key, row.state, toMs(row.expires_at) ?? 0, cells);
}

/** A bigint cell as epoch ms, whichever way the client decodes it. */
export function toMs(value: unknown): number | undefined {
  if (value === null || value === undefined) return undefined;
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  return (value as types.Long).toNumber();
}
