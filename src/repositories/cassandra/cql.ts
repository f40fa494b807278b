import { createHash } from 'node:crypto';
import { ConfigError } from '../../errors.js';
import { IDENTIFIER_PATTERN } from './options.js';

/**
 * Every CQL statement the repository runs. Values always travel as bind markers of prepared statements; the only
 * text spliced into CQL is the keyspace and table name (checked against {@link IDENTIFIER_PATTERN}, so they
 * cannot carry a quote) and, for `createSchema`, the replication map (checked the same way).
 *
 * Layout: `PRIMARY KEY ((ns, bucket), id)`, with `bucket` a stable hash of the id into {@link BUCKETS}.
 * - clear() deletes a namespace with BUCKETS partition deletes and never reads: a scan (the alternative with
 *   `(ns, id)` partitions) walks every expired row of every namespace and fails once it meets more than
 *   `tombstone_failure_threshold` (100k) dead cells, which a busy table with TTLs reaches quickly.
 * - 1024 partitions per namespace spread a namespace over any cluster, and keep partitions small
 *   (100 M live ids per namespace ≈ 100k rows per partition).
 * - Batch reads group ids by bucket into `id IN ?` queries on the clustering column.
 * - The cost: Paxos runs per partition, so two LWTs of different ids in the same bucket at the same moment
 *   contend; with 1024 buckets and 128 LWTs in flight that is a few percent of claims.
 *
 * TTLs and tombstones: the table has no `default_time_to_live`; every write carries `USING TTL` =
 * `storeLifetimeMs(record)` (record.ts) in whole seconds, rounded up (at least 1), so a row disappears about when its record
 * stops mattering. Expired cells and deletes become tombstones that compaction may purge after
 * `gc_grace_seconds`, set to an hour instead of ten days because this table churns. On a multi-node cluster,
 * a replica that misses a delete for longer than that can bring the row back; every row still carries its own
 * TTL and `expires_at`, so such a row lives no longer than it would have anyway.
 */

/** Buckets per namespace. Part of the table's data layout: changing it would hide every existing row. */
export const BUCKETS = 1024;

/** Columns after the primary key, in the order every statement binds them. */
export const RECORD_COLUMNS =
  'state, expires_at, lease_expires_at, owner, event_time, fingerprint, result, first_seen_at';

/** Every column with its CQL type and role, as `createSchema` makes it and as an existing table must have it. */
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

/**
 * Columns added after the first release: `createSchema` adds them to an older table (ALTER TABLE ADD), and
 * without it the layout check says which statement to run.
 */
export const ADDED_COLUMNS: readonly (keyof typeof COLUMNS)[] = ['result', 'first_seen_at'];

/** The DDL that adds an {@link ADDED_COLUMNS} column to an existing table. */
export function addColumnStatement(keyspace: string, table: string, column: keyof typeof COLUMNS): string {
  const t = `${quoteIdentifier(keyspace, 'repository.keyspace')}.${quoteIdentifier(table, 'repository.table')}`;
  return `ALTER TABLE ${t} ADD ${column} ${COLUMNS[column].type}`;
}

/** Tombstones (deletes, expired TTLs) are purged after an hour instead of ten days: this table churns. */
export const GC_GRACE_SECONDS = 3600;

/**
 * Store-side TTLs are capped at ten years: older SSTable formats reject expirations past 2038.
 * The record's own `expires_at` stays exact; only the row's physical removal is capped.
 */
export const MAX_TTL_SECONDS = 10 * 365 * 24 * 3600;

/** The bucket of a key: the first 32 bits of its MD5, so any client in any language finds the same row. */
export function bucketOf(key: string): number {
  return createHash('md5').update(key, 'utf8').digest().readUInt32BE(0) % BUCKETS;
}

/** Returns the name double-quoted (case kept, reserved words allowed) or throws a ConfigError naming `key`. */
export function quoteIdentifier(name: string, key: string): string {
  if (!IDENTIFIER_PATTERN.test(name)) {
    throw new ConfigError(key, `${JSON.stringify(name)} is not a valid identifier (${IDENTIFIER_PATTERN})`);
  }
  return `"${name}"`;
}

/** The `{...}` literal of a replication map; keys and values are re-checked because they are spliced into DDL. */
export function replicationLiteral(replication: Readonly<Record<string, string | number>>): string {
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

/** DDL for `createSchema`. */
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

/** The prepared statements, by purpose. */
export interface Statements {
  readonly select: string;
  /** Several ids of one bucket. */
  readonly selectIn: string;
  /** Eager claim: an LWT that returns the existing row when not applied. */
  readonly claim: string;
  /** Takeover of a row our own clock says is expired: compare-and-set on the values read. */
  readonly takeover: string;
  /** Lazy mark: a plain write (lazy mode accepts concurrent duplicates, so no Paxos round). */
  readonly mark: string;
  /** Confirm: compare-and-set on the claim the caller owns. */
  readonly confirm: string;
  readonly removeOwned: string;
  readonly remove: string;
  /** One bucket of a namespace, for clear(). */
  readonly removeBucket: string;
  /** Every row of one bucket of a namespace (paged by the driver): `ns`, `bucket`. */
  readonly scanBucket: string;
}

/** Builds the statements for one table. */
export function statements(keyspace: string, table: string): Statements {
  const t = `${quoteIdentifier(keyspace, 'repository.keyspace')}.${quoteIdentifier(table, 'repository.table')}`;
  const row = 'WHERE ns = ? AND bucket = ? AND id = ?';
  const setAll =
    'state = ?, expires_at = ?, lease_expires_at = ?, owner = ?, event_time = ?, fingerprint = ?, result = ?, ' +
    'first_seen_at = ?';
  const insert = `INSERT INTO ${t} (ns, bucket, id, ${RECORD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
  return {
    select: `SELECT ${RECORD_COLUMNS} FROM ${t} ${row}`,
    selectIn: `SELECT id, ${RECORD_COLUMNS} FROM ${t} WHERE ns = ? AND bucket = ? AND id IN ?`,
    claim: `${insert} IF NOT EXISTS USING TTL ?`,
    // Every column is set (nulls included): an UPDATE's TTL covers only the cells it writes.
    takeover: `UPDATE ${t} USING TTL ? SET ${setAll} ${row}
      IF state = ? AND owner = ? AND expires_at = ? AND lease_expires_at = ?`,
    mark: `${insert} USING TTL ?`,
    // The lease and expiry pin the exact claim whose event_time/fingerprint were read and are rewritten here;
    // when not applied, they come back and tell a timed-out confirm whether it landed.
    confirm: `UPDATE ${t} USING TTL ? SET ${setAll} ${row}
      IF state = 'in-flight' AND owner = ? AND lease_expires_at = ? AND expires_at = ?`,
    removeOwned: `DELETE FROM ${t} ${row} IF state = 'in-flight' AND owner = ?`,
    remove: `DELETE FROM ${t} ${row}`,
    removeBucket: `DELETE FROM ${t} WHERE ns = ? AND bucket = ?`,
    scanBucket: `SELECT id, ${RECORD_COLUMNS} FROM ${t} WHERE ns = ? AND bucket = ?`,
  };
}

/** A record's store-side TTL in whole seconds, rounded up, at least 1, at most {@link MAX_TTL_SECONDS}. */
export function ttlSeconds(forgetAtMs: number, now: number): number {
  return Math.min(MAX_TTL_SECONDS, Math.max(1, Math.ceil((forgetAtMs - now) / 1000)));
}
