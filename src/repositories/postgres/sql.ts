import { createHash } from 'node:crypto';
import type { IdempotencyRecord } from '../../store/types.js';

/*
 * Statements of the PostgreSQL repository and the codec between records and rows.
 *
 * Time: every statement judges liveness, and counts TTLs and leases, from the `now` it is given (event-time mode
 * passes stream time) or, when given NULL, from the server's clock: `statement_timestamp()`, in whole epoch ms.
 * One clock for every worker, as the Redis store does with `TIME`: a worker whose clock runs ahead cannot take
 * over a live claim. `statement_timestamp()` rather than `now()`, which inside a transaction stands at its
 * BEGIN. `forget_at` (what `purge()` goes by) always counts on the server's clock, like Redis' PX.
 *
 * Times are epoch ms in `double precision`: a TTL or a lease may be a fraction of a ms, and the server adds it
 * exactly as JavaScript would (both IEEE binary64), so the record a claim answers is the record a read returns.
 */

/** The server's time in whole epoch ms, fixed for the whole statement. */
const WALL = 'floor(extract(epoch FROM statement_timestamp()) * 1000)::float8';

/** The time a statement judges by: the caller's (parameter `param`), else the server's. */
const nowOf = (param: string) => `COALESCE(${param}::float8, ${WALL})`;

/** The end of a row's liveness: an in-flight row counts until its lease ends, a confirmed one until it expires. */
const LIVE_UNTIL = (r: string) =>
  `(CASE WHEN ${r}.state = 'in-flight' THEN COALESCE(${r}.lease_expires_at, 0) ELSE ${r}.expires_at END)`;

/**
 * The columns the repository reads and writes, with the type `format_type` reports for each: checked when the
 * repository opens, so a table of another shape fails at start, not at the first message.
 */
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

/** Columns added after the first release: the migration adds them to an older table (see migration.ts). */
export const ADDED_COLUMNS = { first_seen_at: 'double precision' } as const;

/** A statement the repository runs, prepared by name on each connection the first time it is used there. */
export interface Statement {
  /** Empty: not prepared, planned at each run (see Statements.purge). */
  readonly name: string;
  readonly text: string;
}

/**
 * A prepared statement named after its text: repositories over different tables may share a pool, and
 * node-postgres refuses one name for two texts on one connection.
 */
function statement(kind: string, text: string): Statement {
  const digest = createHash('sha256').update(text).digest('hex').slice(0, 16);
  return { name: `idem_${kind}_${digest}`, text };
}

/** `"schema"."table"` or `"table"`: parts are validated identifiers (see TABLE_PATTERN), quoted as given. */
export function quoteTable(table: string): string {
  return table
    .split('.')
    .map((part) => `"${part.replaceAll('"', '""')}"`)
    .join('.');
}

/** The purge index's name (unqualified: an index lives in its table's schema). */
export function forgetIndexName(table: string): string {
  const name = table.split('.').pop() as string;
  return `${name}_forget_at`;
}

/** Columns of a record as the reads return them. */
const RECORD_COLUMNS = (r: string) =>
  `${r}.state, ${r}.expires_at, ${r}.lease_expires_at, ${r}.owner, ${r}.event_time, ${r}.fingerprint, ${r}.result, ` +
  `${r}.first_seen_at`;

/** The statements over one table. Parameter lists are documented per statement. */
export interface Statements {
  /**
   * Claim or lazy-mark each id: insert it, or replace the row that holds it when no longer live; rows `id, now`
   * of the ids this call took (the stored id, the time it judged by). An id not answered is held by a live row.
   * `$1` namespace, `$2` now|NULL, `$3` ids (distinct), `$4` event times, `$5` fingerprints, `$6` results (the
   * last three may be empty arrays: unnest pads them with NULL), `$7` state, `$8` ttlMs, `$9` leaseMs|NULL,
   * `$10` owner|NULL, `$11` how long the row is kept, in ms of the server's clock.
   */
  readonly claim: Statement;
  /**
   * {@link claim} for one id: `$3` to `$6` are that id's values (scalars, NULL for none), the rest as claim's.
   * A statement of its own because PostgreSQL cannot know how many ids an array parameter holds: the generic
   * plan of {@link claim} counts on several, costs more than a custom plan for one and is never chosen, so
   * every one-id claim (a message in its own transaction) was planned again, which cost more than running it.
   * With scalars the generic plan is the custom plan, and the connection plans it once.
   */
  readonly claimOne: Statement;
  /** Live records by id: `$1` namespace, `$2` ids, `$3` now|NULL. Rows `n, now, record columns`. */
  readonly read: Statement;
  /** Input positions of live ids: `$1` namespace, `$2` ids, `$3` now|NULL. Rows `n`. */
  readonly contains: Statement;
  /**
   * Confirms each owner's in-flight claim: `$1` namespace, `$2` ids, `$3` owners, `$4` results (may be empty),
   * `$5` ttlMs, `$6` now|NULL. Rows `n` of the claims confirmed.
   */
  readonly confirm: Statement;
  /** Extends the owner's claim: `$1` namespace, `$2` id, `$3` owner, `$4` leaseMs, `$5` now|NULL. */
  readonly renew: Statement;
  /** `$1` namespace, `$2` id. */
  readonly remove: Statement;
  /** `$1` namespace, `$2` id, `$3` owner: only that owner's in-flight claim. */
  readonly release: Statement;
  /** `$1` namespace. */
  readonly clear: Statement;
  /** One page of the namespace's rows in id order (live or not): `$1` namespace, `$2` last id seen, `$3` limit. */
  readonly scan: Statement;
  /**
   * Deletes at most `$1` rows the store may forget (`forget_at` passed on the server's clock). Rows another
   * transaction holds are skipped rather than waited for: a purge never stalls a claim, nor the other way round.
   */
  readonly purge: Statement;
}

/** Builds the statements over `table` (validated: see TABLE_PATTERN). */
export function statements(table: string): Statements {
  const t = quoteTable(table);
  const now2 = nowOf('$2');
  // The claim is the write alone: a new id (the common case) costs one INSERT through the primary key, no CTE, no
  // join back, no lookup. Ids it did not take are held by a live row, which the repository reads in a statement
  // of its own (`read`): a new snapshot, so it also finds a row committed after this statement's began.
  // Every row a claim takes has `first_seen_at` = the `now` it judged by: RETURNING reads it, computing nothing.
  const write = (source: string, now: string) => `
    INSERT INTO ${t} AS r
      (namespace, id, state, expires_at, lease_expires_at, owner, event_time, fingerprint, result, forget_at,
        first_seen_at)
    ${source}
    ON CONFLICT (namespace, id) DO UPDATE SET
      state = EXCLUDED.state, expires_at = EXCLUDED.expires_at, lease_expires_at = EXCLUDED.lease_expires_at,
      owner = EXCLUDED.owner, event_time = EXCLUDED.event_time, fingerprint = EXCLUDED.fingerprint,
      result = EXCLUDED.result, forget_at = EXCLUDED.forget_at, first_seen_at = EXCLUDED.first_seen_at
    WHERE ${LIVE_UNTIL('r')} <= ${now}
    RETURNING r.id, r.first_seen_at AS now`;
  const row = (
    now: string,
    wall: string,
    id: string,
    eventTime: string,
    fingerprint: string,
    result: string,
  ) =>
    `$1, ${id}, $7, ${now} + $8::float8, ${now} + $9::float8, $10::text, ${eventTime}, ${fingerprint}, ` +
    `${result}, ${wall} + $11::float8, ${now}`;
  // A batch's times as uncorrelated subqueries: each an InitPlan, computed once per statement rather than once per
  // row (~15 % of a 100-id claim's server time). One id computes them once anyway, and cheaper without the plans.
  const nowOnce = `(SELECT ${now2})`;
  return {
    claim: statement(
      'claim',
      write(
        `SELECT ${row(nowOnce, `(SELECT ${WALL})`, 'u.id', 'u.event_time', 'u.fingerprint', 'u.result')}
    FROM unnest($3::text[], $4::float8[], $5::text[], $6::text[]) AS u(id, event_time, fingerprint, result)
    -- Rows are locked in id order, so two batches over the same ids cannot deadlock.
    ORDER BY u.id`,
        nowOnce,
      ),
    ),
    claimOne: statement(
      'claim_one',
      write(`VALUES (${row(now2, WALL, '$3::text', '$4::float8', '$5::text', '$6::text')})`, now2),
    ),
    // One lookup per id on the primary key (a LATERAL subquery kept apart by OFFSET 0): a join would let a
    // generic plan cached on a young table scan the whole namespace once it has grown.
    read: statement(
      'read',
      `SELECT u.n, ${nowOf('$3')} AS now, ${RECORD_COLUMNS('r')}
      FROM unnest($2::text[]) WITH ORDINALITY AS u(id, n)
      CROSS JOIN LATERAL (SELECT x.* FROM ${t} x WHERE x.namespace = $1 AND x.id = u.id OFFSET 0) r
      WHERE ${LIVE_UNTIL('r')} > ${nowOf('$3')}`,
    ),
    contains: statement(
      'contains',
      `SELECT u.n
      FROM unnest($2::text[]) WITH ORDINALITY AS u(id, n)
      CROSS JOIN LATERAL (SELECT x.* FROM ${t} x WHERE x.namespace = $1 AND x.id = u.id OFFSET 0) r
      WHERE ${LIVE_UNTIL('r')} > ${nowOf('$3')}`,
    ),
    // The lease is not checked: a claim past its lease that no one took over is still its owner's to confirm
    // (a takeover rewrites the owner, and then this refuses). Event time and fingerprint are kept.
    confirm: statement(
      'confirm',
      `UPDATE ${t} AS r SET state = 'confirmed', expires_at = ${nowOf('$6')} + $5::float8,
        lease_expires_at = NULL, owner = NULL, result = u.result, forget_at = ${WALL} + $5::float8
      FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u(id, owner, result, n)
      WHERE r.namespace = $1 AND r.id = u.id AND r.id = ANY ($2::text[]) AND r.state = 'in-flight'
        AND r.owner = u.owner
      RETURNING u.n`,
    ),
    // The row is kept at least as long as the new lease (never shortened), like the Redis store's PX.
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
    scan: statement(
      'scan',
      `SELECT r.id, ${RECORD_COLUMNS('r')} FROM ${t} r WHERE r.namespace = $1 AND r.id > $2 ORDER BY r.id LIMIT $3`,
    ),
    // Not prepared (no name): planned at each run, on the table as it is then. A generic plan made while the
    // table was small (a new deployment's first purges) scans it whole twice per batch (a Seq Scan for the rows
    // due, another for `ctid = ANY`) until autoanalyze replaces the plan; a plan made per batch picks the
    // forget_at index and a Tid Scan as soon as the table has grown, stale statistics or not. A purge batch
    // runs seldom, so its planning costs nothing that shows. Oldest first (ORDER BY forget_at): the index gives
    // that order, where without it the planner, which guesses that a third of the rows are due, may scan the
    // table from its start for them.
    purge: {
      name: '',
      text: `DELETE FROM ${t} WHERE ctid = ANY (ARRAY(
        SELECT ctid FROM ${t} WHERE forget_at <= ${WALL} ORDER BY forget_at LIMIT $1 FOR UPDATE SKIP LOCKED
      ))`,
    },
  };
}

/*
 * Text columns cannot hold U+0000, which canonical keys (binary ids are `\0b64:…`), owners, fingerprints and
 * results may contain. The codec writes U+0000 as DLE `0` and DLE itself as DLE DLE: injective, and a string
 * without either (nearly every id) is stored as it is, readable and queryable (`WHERE id = 'order-42'`).
 */
const DLE = '\u0010';
const NUL = '\u0000';

/** A string as stored in a text column (see the codec above). */
export function encodeText(value: string): string {
  if (!value.includes(NUL) && !value.includes(DLE)) return value;
  return value.replaceAll(DLE, DLE + DLE).replaceAll(NUL, `${DLE}0`);
}

/** Inverse of {@link encodeText}. */
export function decodeText(stored: string): string {
  if (!stored.includes(DLE)) return stored;
  let text = '';
  for (let i = 0; i < stored.length; i++) {
    const c = stored[i] as string;
    if (c !== DLE) {
      text += c;
      continue;
    }
    const next = stored[++i];
    text += next === '0' ? NUL : DLE;
  }
  return text;
}

/** `encodeText`, keeping absence (NULL). */
export function encodeOptional(value: string | undefined): string | null {
  return value === undefined ? null : encodeText(value);
}

/** The record columns of a row, as the driver returns them. */
export interface RecordRow {
  readonly state: string | null;
  readonly expires_at: number | null;
  readonly lease_expires_at: number | null;
  readonly owner: string | null;
  readonly event_time: number | null;
  readonly fingerprint: string | null;
  readonly result: string | null;
  /** Null on a row written by a version that did not keep it. */
  readonly first_seen_at: number | null;
}

/** The record a row holds, under the canonical key `key`. */
export function decodeRow(key: string, row: RecordRow): IdempotencyRecord {
  const record: { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] } = {
    id: key,
    state: row.state === 'in-flight' ? 'in-flight' : 'confirmed',
    expiresAt: Number(row.expires_at),
  };
  if (row.lease_expires_at !== null) record.leaseExpiresAt = Number(row.lease_expires_at);
  if (row.owner !== null) record.owner = decodeText(row.owner);
  if (row.event_time !== null) record.eventTime = Number(row.event_time);
  if (row.fingerprint !== null) record.fingerprint = decodeText(row.fingerprint);
  if (row.result !== null) record.result = decodeText(row.result);
  if (row.first_seen_at != null) record.firstSeenAt = Number(row.first_seen_at);
  return record;
}
