import { createHash } from 'node:crypto';
import type { IdempotencyRecord } from '../../store/types.js';
import { decodeRecord, type SqlRecordRow } from '../sql/store.js';

/*
 * Every statement judges by the `now` it is given (event-time mode) or, given NULL, by the server's clock, so a
 * worker whose clock runs ahead cannot take over a live claim; `forget_at` always counts on the server's clock.
 * Times are epoch ms in `double precision`, added exactly as JavaScript adds them (both IEEE binary64).
 */

/** SQLSTATEs: a statement before this one broke the transaction; a lock wait ran out; no such table. */
export const IN_FAILED_TRANSACTION = '25P02';
export const LOCK_NOT_AVAILABLE = '55P03';
export const UNDEFINED_TABLE = '42P01';

/** The server's time in whole epoch ms, fixed for the statement (`now()` would stand at the transaction's BEGIN). */
const WALL = 'floor(extract(epoch FROM statement_timestamp()) * 1000)::float8';

/** The caller's time (parameter `param`), else the server's. */
const nowOf = (param: string) => `COALESCE(${param}::float8, ${WALL})`;

/** An in-flight row counts until its lease ends, a confirmed one until it expires. */
const LIVE_UNTIL = (r: string) =>
  `(CASE WHEN ${r}.state = 'in-flight' THEN COALESCE(${r}.lease_expires_at, 0) ELSE ${r}.expires_at END)`;

/** The columns the statements use, with the type `format_type` reports for each (checked at open). */
export const COLUMNS = {
  namespace: 'text',
  id: 'text',
  state: 'text',
  expires_at: 'double precision',
  lease_expires_at: 'double precision',
  owner: 'text',
  event_time: 'double precision',
  fingerprint: 'text',
  result: 'text',
  forget_at: 'double precision',
  first_seen_at: 'double precision',
} as const;

export const ADDED_COLUMNS = { first_seen_at: 'double precision' } as const;

/** Prepared by name on each connection the first time it is used there. */
export interface Statement {
  /** Empty: planned at each run (see purge). */
  readonly name: string;
  readonly text: string;
}

/** Named after its text: repositories over different tables may share a pool, and a name holds one text. */
function statement(kind: string, text: string): Statement {
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
  return { name: `idem_${kind}_${digest}`, text };
}

/** `"schema"."table"` or `"table"` (parts validated, see options.ts). */
export function quoteTable(table: string): string {
  return table
    .split('.')
    .map((part) => `"${part.replaceAll('"', '""')}"`)
    .join('.');
}

/** Unqualified: an index lives in its table's schema. */
export function forgetIndexName(table: string): string {
  const name = table.split('.').pop() as string;
  return `${name}_forget_at`;
}

const RECORD_COLUMNS = (r: string) =>
  `${r}.state, ${r}.expires_at, ${r}.lease_expires_at, ${r}.owner, ${r}.event_time, ${r}.fingerprint, ${r}.result, ` +
  `${r}.first_seen_at`;

export type Statements = ReturnType<typeof statements>;

/** The statements over `table` (validated: see options.ts). */
export function statements(table: string) {
  const t = quoteTable(table);
  const now2 = nowOf('$2');
  // The claim is the write alone: a new id costs one INSERT through the primary key. Ids it did not take are
  // read in a statement of its own (`read`). A taken row's `first_seen_at` is the `now` it judged by. Without
  // `takeOver` it leaves every existing row alone (DO NOTHING): the server then builds no update of the row.
  const write = (source: string, now: string, takeOver = true) => `
    INSERT INTO ${t} AS r
      (namespace, id, state, expires_at, lease_expires_at, owner, event_time, fingerprint, result, forget_at,
        first_seen_at)
    ${source}
    ON CONFLICT (namespace, id) ${
      takeOver
        ? `DO UPDATE SET
      state = EXCLUDED.state, expires_at = EXCLUDED.expires_at, lease_expires_at = EXCLUDED.lease_expires_at,
      owner = EXCLUDED.owner, event_time = EXCLUDED.event_time, fingerprint = EXCLUDED.fingerprint,
      result = EXCLUDED.result, forget_at = EXCLUDED.forget_at, first_seen_at = EXCLUDED.first_seen_at
    WHERE ${LIVE_UNTIL('r')} <= ${now}`
        : 'DO NOTHING'
    }
    RETURNING r.id, r.first_seen_at AS now`;
  // `fields`: the event time, fingerprint and result.
  const row = (now: string, wall: string, id: string, fields: string) =>
    `$1, ${id}, $7, ${now} + $8::float8, ${now} + $9::float8, $10::text, ${fields}, ${wall} + $11::float8, ${now}`;
  // The live rows of ids `$2` at `$3`: one primary-key lookup per id (a LATERAL kept apart by OFFSET 0), where a
  // join's generic plan cached on a young table would scan it once grown.
  const liveIds = `
      FROM unnest($2::text[]) WITH ORDINALITY AS u(id, n)
      CROSS JOIN LATERAL (SELECT x.* FROM ${t} x WHERE x.namespace = $1 AND x.id = u.id OFFSET 0) r
      WHERE ${LIVE_UNTIL('r')} > ${nowOf('$3')}`;
  const oneRow = `VALUES (${row(now2, WALL, '$3::text', '$4::float8, $5::text, $6::text')})`;
  // A batch's times as uncorrelated subqueries (InitPlans): computed once per statement, not once per row.
  const nowOnce = `(SELECT ${now2})`;
  return {
    /**
     * Claims or lazy-marks each id: inserts it, or replaces a row no longer live; rows `id, now` of the ids it
     * took. `$1` namespace, `$2` now|NULL, `$3` ids (distinct), `$4` event times, `$5` fingerprints, `$6`
     * results (`$4`-`$6` may be empty: unnest pads them with NULL), `$7` state, `$8` ttlMs, `$9` leaseMs|NULL,
     * `$10` owner|NULL, `$11` how long the row is kept, in ms of the server's clock.
     */
    claim: statement(
      'claim',
      write(
        `SELECT ${row(nowOnce, `(SELECT ${WALL})`, 'u.id', 'u.event_time, u.fingerprint, u.result')}
    FROM unnest($3::text[], $4::float8[], $5::text[], $6::text[]) AS u(id, event_time, fingerprint, result)
    -- Rows are locked in id order, so two batches over the same ids cannot deadlock.
    ORDER BY u.id`,
        nowOnce,
      ),
    ),
    /**
     * {@link claim} for one id, `$3`-`$6` scalars: an array claim's generic plan is never chosen for one id, so
     * each was planned again; with scalars the connection plans it once.
     */
    claimOne: statement('claim_one', write(oneRow, now2)),
    /**
     * {@link claimOne} that takes no row over: a new id's claim, the common case, then costs no ON CONFLICT update
     * (set up at every execution even when no row conflicts). An id it did not take is read, then `claimOne`.
     */
    claimNew: statement('claim_new', write(oneRow, now2, false)),
    // `$1` namespace, `$2` ids, `$3` now|NULL; rows `n, now, record columns`.
    read: statement('read', `SELECT u.n, ${nowOf('$3')} AS now, ${RECORD_COLUMNS('r')}${liveIds}`),
    // As read; rows `n` only.
    contains: statement('contains', `SELECT u.n${liveIds}`),
    // `$1` namespace, `$2` ids, `$3` owners, `$4` results (may be empty), `$5` ttlMs, `$6` now|NULL; rows `n`.
    // The lease is not checked: a lapsed claim no one took over (which rewrites the owner) is still its owner's.
    confirm: statement(
      'confirm',
      `UPDATE ${t} AS r SET state = 'confirmed', expires_at = ${nowOf('$6')} + $5::float8,
        lease_expires_at = NULL, owner = NULL, result = u.result, forget_at = ${WALL} + $5::float8
      FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(id, owner, result, n)
      WHERE r.namespace = $1 AND r.id = u.id AND r.id = ANY ($2::text[]) AND r.state = 'in-flight'
        AND r.owner = u.owner
      RETURNING u.n`,
    ),
    // `$1` namespace, `$2` id, `$3` owner, `$4` leaseMs, `$5` now|NULL. The row is kept at least as long.
    renew: statement(
      'renew',
      `UPDATE ${t} SET lease_expires_at = ${nowOf('$5')} + $4::float8,
        forget_at = GREATEST(forget_at, ${WALL} + $4::float8)
      WHERE namespace = $1 AND id = $2 AND state = 'in-flight' AND owner = $3`,
    ),
    remove: statement('remove', `DELETE FROM ${t} WHERE namespace = $1 AND id = $2`),
    release: statement(
      'release',
      `DELETE FROM ${t} WHERE namespace = $1 AND id = $2 AND state = 'in-flight' AND owner = $3`,
    ),
    clear: statement('clear', `DELETE FROM ${t} WHERE namespace = $1`),
    // `$1` namespace, `$2` last id seen, `$3` limit.
    scan: statement(
      'scan',
      `SELECT r.id, ${RECORD_COLUMNS('r')} FROM ${t} r WHERE r.namespace = $1 AND r.id > $2 ORDER BY r.id LIMIT $3`,
    ),
    // At most `$1` rows past `forget_at`, oldest first (the index's order); rows another transaction holds are
    // skipped. Not prepared: a generic plan made while the table was small would scan it whole twice per batch
    // until autoanalyze; planned per batch, it takes the forget_at index and a Tid Scan once the table has grown.
    purge: {
      name: '',
      text: `DELETE FROM ${t} WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM ${t} WHERE forget_at <= ${WALL} ORDER BY forget_at LIMIT $1 FOR UPDATE SKIP LOCKED
      ))`,
    },
  };
}

/*
 * Text columns cannot hold U+0000, which keys (binary ids are `\0b64:…`) and strings may contain: written as
 * DLE `0`, and DLE itself as DLE DLE. A string without either (nearly every id) is stored as it is.
 */
const DLE = '\u0010';
const NUL = '\u0000';

export function encodeText(value: string): string {
  if (!value.includes(NUL) && !value.includes(DLE)) return value;
  return value.replaceAll(DLE, DLE + DLE).replaceAll(NUL, `${DLE}0`);
}

/** A DLE and the character it escapes (none at the end). */
const ESCAPE = new RegExp(`${DLE}([\\s\\S]?)`, 'g');

/** Inverse of {@link encodeText}. */
export function decodeText(stored: string): string {
  if (!stored.includes(DLE)) return stored;
  return stored.replace(ESCAPE, (_, next) => (next === '0' ? NUL : DLE));
}

/** {@link encodeText}, keeping absence (NULL). */
export function encodeOptional(value: string | undefined): string | null {
  return value === undefined ? null : encodeText(value);
}

export type RecordRow = SqlRecordRow<string>;

export function decodeRow(key: string, row: RecordRow): IdempotencyRecord {
  return decodeRecord(key, row, decodeText);
}
