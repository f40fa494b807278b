import type { IdempotencyRecord } from '../../store/types.js';
import { decodeRecord, type SqlRecordRow } from '../sql/store.js';
import { tables } from './options.js';

export function errorNumber(error: unknown): number | undefined {
  const errno = (error as { errno?: unknown } | undefined)?.errno;
  return typeof errno === 'number' ? errno : undefined;
}

/** A row or metadata lock wait ran out. */
export const ER_LOCK_WAIT_TIMEOUT = 1205;
export const ER_LOCK_DEADLOCK = 1213;
/** `SAVEPOINT … does not exist`: the transaction that set it has ended (the server rolled it back). */
export const ER_SP_DOES_NOT_EXIST = 1305;
/** `Unknown prepared statement handler`: mysql2 closed the statement (its cache evicted it). */
export const ER_UNKNOWN_STMT_HANDLER = 1243;
export const ER_NO_SUCH_TABLE = 1146;
/** The column exists already. */
export const ER_DUP_FIELDNAME = 1060;

/** A validated table name quoted for SQL (`` `db`.`table` ``): its parts never need more than backquotes. */
export function quoteTable(table: string): string {
  return `\`${table.replace('.', '`.`')}\``;
}

/** `table`'s database (null: the connection's) and name. */
export function schemaAndName(table: string): [string | null, string] {
  const parts = table.split('.');
  return parts.length === 2 ? [parts[0] as string, parts[1] as string] : [null, table];
}

/** The columns the statements use, with the `DATA_TYPE` information_schema reports for each (checked at open). */
export const COLUMNS = {
  namespace: 'varbinary',
  id: 'varbinary',
  state: 'enum',
  expires_at: 'bigint',
  lease_expires_at: 'bigint',
  owner: 'varbinary',
  event_time: 'bigint',
  fingerprint: 'varbinary',
  result: 'mediumblob',
  forget_at: 'bigint',
  token: 'bigint',
  first_seen_at: 'bigint',
} as const;

export const ADDED_COLUMNS = { first_seen_at: 'bigint' } as const;

/** Widest owner and fingerprint, in UTF-8 bytes (their columns). */
export const MAX_FIELD_BYTES = 1024;

/**
 * The server's clock in epoch ms: the statement's start, the same for every row, whatever the session's time
 * zone (`UNIX_TIMESTAMP(NOW(3))` goes through local time and is an hour off in a DST fold).
 */
export const NOW_MS = 'FLOOR(@@timestamp * 1000)';

/** An in-flight row counts until its lease ends, a confirmed one until it expires. */
const LIVE_UNTIL = "IF(state = 'in-flight', COALESCE(lease_expires_at, 0), expires_at)";

const RECORD_COLUMNS =
  'id, state, expires_at, lease_expires_at, owner, event_time, fingerprint, result, first_seen_at';

/** Most rows in one statement: 14 parameters a row stays far below the protocol's 65535 placeholders. */
export const MAX_ROWS = 1024;

/** Most bytes of ids and strings in one statement: far below `max_allowed_packet` (16 MiB on MariaDB). */
export const MAX_STATEMENT_BYTES = 4 * 1024 * 1024;

/**
 * The statement size for `n` rows: `n` up to 8, then the next of four steps per power of two (100 → 112): each
 * size is a text every connection prepares and keeps, so varying batch sizes prepare a few.
 */
export function bucket(n: number): number {
  if (n <= 8) return n;
  const step = 2 ** (Math.floor(Math.log2(n)) - 2);
  return Math.min(MAX_ROWS, Math.ceil(n / step) * step);
}

function marks(n: number): string {
  return new Array<string>(n).fill('?').join(', ');
}

/** A row as mysql2 returns it: bytes as Buffers, BIGINT as numbers (strings past 2^53). */
export interface Row extends SqlRecordRow<Buffer> {
  readonly id: Buffer;
  /** In the claim's read-back: 1 when this call's token is on the row. */
  readonly won?: number | string | null;
}

export function bytes(text: string): Buffer {
  return Buffer.from(text, 'utf8');
}

export function optionalBytes(text: string | undefined): Buffer | null {
  return text === undefined ? null : Buffer.from(text, 'utf8');
}

export function decodeRow(row: Row): IdempotencyRecord {
  return decodeRecord(row.id.toString('utf8'), row, utf8);
}

const utf8 = (stored: Buffer): string => stored.toString('utf8');

/**
 * Adds `last_insert_id` to the session variables each OK packet reports (MariaDB 10.2+, parsed by mysql2): once
 * per connection, before its first {@link Statements.claimInBlock}.
 */
export const TRACK_LAST_INSERT_ID =
  'SET SESSION session_track_system_variables = IF(@@SESSION.session_track_system_variables = ' +
  "'*', '*', CONCAT_WS(',', NULLIF(@@SESSION.session_track_system_variables, ''), 'last_insert_id'))";

/**
 * What {@link Statements.claimInBlock} leaves in `last_insert_id` when it took a lapsed row over (its token only):
 * the whole claim follows. A claim's own time of 1 ms reads the same and only costs that statement.
 */
export const TAKEN_OVER = 1;

/** A claim's row (see {@link Statements.claim}). */
const CLAIM_ROW = `(?, ?, ?, LAST_INSERT_ID(COALESCE(?, ${NOW_MS})) + ?, COALESCE(?, ${NOW_MS}) + ?, ?, ?, ?, ?, ${NOW_MS} + ?, ?, COALESCE(?, ${NOW_MS}))`;

/** A {@link Statements.markInBlock} row: namespace, id, ttl, event time, fingerprint, result, lifetime, token. */
const MARK_ROW = `(?, ?, 'confirmed', LAST_INSERT_ID(${NOW_MS}) + ?, NULL, NULL, ?, ?, ?, ${NOW_MS} + ?, ?, ${NOW_MS})`;

/**
 * The values a claim's rows share, as session variables (MariaDB, in the transaction's first round trip, see
 * {@link Statements.claimShared}); none reads another, as their order is not one to rely on. Parameters:
 * namespace, state, base, ttl, base, lease, owner, lifetime, token.
 */
export const SHARE_CLAIM =
  `SET @idem_ns = ?, @idem_state = ?, @idem_base = COALESCE(?, ${NOW_MS}), @idem_ttl = ?, ` +
  `@idem_lease = COALESCE(?, ${NOW_MS}) + ?, @idem_owner = ?, @idem_forget = ${NOW_MS} + ?, @idem_token = ?`;

/** A row of {@link Statements.claimShared}; `LAST_INSERT_ID` puts the claim's time in its OK packet. */
const SHARED_ROW =
  '(@idem_ns, ?, @idem_state, LAST_INSERT_ID(@idem_base) + @idem_ttl, @idem_lease, @idem_owner, ?, ?, ?, ' +
  '@idem_forget, @idem_token, @idem_base)';

/** After the token's: each column takes the new value where the row took the token. */
const FOLLOW_TOKEN =
  'state expires_at lease_expires_at owner event_time fingerprint result forget_at first_seen_at'
    .split(' ')
    .map((column) => `${column} = IF(token = VALUES(token), VALUES(${column}), ${column})`)
    .join(', ');

/** `build` with each text built once per size (every connection prepares and keeps it). */
function sized(build: (n: number) => string): (n: number) => string {
  const texts = new Map<number, string>();
  return (n) => {
    let text = texts.get(n);
    if (text === undefined) {
      text = build(n);
      texts.set(n, text);
    }
    return text;
  };
}

/** Every statement of one table, its text built once per size; all prepared, namespace and ids as bytes. */
export function statements(table: string) {
  const t = quoteTable(tables.check(table));
  /** The claim up to its first assignment, which takes the row (its token). `now`: the liveness test's time. */
  const claimInsert = (rows: number, signalKept: boolean, row = CLAIM_ROW, now = `COALESCE(?, ${NOW_MS})`) =>
    `INSERT INTO ${t} (namespace, id, state, expires_at, lease_expires_at, owner, event_time, ` +
    `fingerprint, result, forget_at, token, first_seen_at) VALUES ${new Array<string>(rows).fill(row).join(', ')} ` +
    `ON DUPLICATE KEY UPDATE token = IF(${LIVE_UNTIL} <= ${now}, VALUES(token), ` +
    `${signalKept ? 'IF(LAST_INSERT_ID(0) = 0, token, token)' : 'token'})`;
  const claim = sized((rows) => `${claimInsert(rows, false)}, ${FOLLOW_TOKEN}`);
  const claimKept = sized((rows) => `${claimInsert(rows, true)}, ${FOLLOW_TOKEN}`);
  const inBlock = (claim: string) =>
    `${claim}; SET SESSION last_insert_id = IF(ROW_COUNT() = 2, ${TAKEN_OVER}, LAST_INSERT_ID())`;
  return {
    table: t,
    /** Parameters: token, lease, lease, namespace, id, owner. `forget_at` only moves later. */
    renew:
      `UPDATE ${t} SET token = ?, lease_expires_at = ${NOW_MS} + ?, forget_at = GREATEST(forget_at, ${NOW_MS} + ?) ` +
      `WHERE namespace = ? AND id = ? AND state = 'in-flight' AND owner = ?`,
    /** Parameters: namespace, id. */
    remove: `DELETE FROM ${t} WHERE namespace = ? AND id = ?`,
    /** Deletes the owner's in-flight claim only. Parameters: namespace, id, owner. */
    removeOwned: `DELETE FROM ${t} WHERE namespace = ? AND id = ? AND state = 'in-flight' AND owner = ?`,
    /**
     * A one-row claim in a compound block (MariaDB), leaving in `last_insert_id` the claim's time when it took a
     * new id, 0 when it left the row, {@link TAKEN_OVER} when it took a lapsed row over (`claim` then completes
     * it). Only the insert runs, not the nine other assignments. Parameters: the claim's.
     */
    claimInBlock: inBlock(claimInsert(1, true)),
    /**
     * `claimInBlock` for the commonest mark (confirmed, no lease, the server's clock), with fewer parameters to
     * bind. Parameters: namespace, id, ttl, event time, fingerprint, result, lifetime, token.
     */
    markInBlock: inBlock(claimInsert(1, true, MARK_ROW, NOW_MS)),
    /**
     * The claim (and lazy mark) of `rows` rows: an upsert that takes a row only when none is there or it is no
     * longer live, never raising a duplicate-key error. Per row: namespace, id, state, base, ttl, base, lease,
     * owner, event time, fingerprint, result, lifetime, token, base (first seen); then `now` for the liveness
     * test. `base` and `now` are the caller's time or NULL for the server's clock; `LAST_INSERT_ID(…)` puts the
     * time used in the OK packet. ON DUPLICATE KEY UPDATE assigns left to right: the first decides whether this
     * call takes the row and writes its token, the others follow the token (`VALUES(col)`: MariaDB has no row
     * alias). `signalKept`: a row left as it was sets the insert id to 0 (for `claimInBlock`).
     */
    claim: (rows: number, signalKept = false): string => (signalKept ? claimKept(rows) : claim(rows)),
    /**
     * `claim` reading the shared values from {@link SHARE_CLAIM}'s variables: a row binds four parameters, not
     * fourteen. Parameters: per row id, event time, fingerprint, result; then `now`.
     */
    claimShared: sized((rows) => `${claimInsert(rows, false, SHARED_ROW)}, ${FOLLOW_TOKEN}`),
    /**
     * The rows a claim left, with whether it wrote each (its token): a locking read sees the latest committed
     * rows and holds them. Parameters: token, namespace, `ids` ids.
     */
    readBack: sized(
      (ids) =>
        `SELECT ${RECORD_COLUMNS}, token = ? AS won FROM ${t} WHERE namespace = ? AND id IN (${marks(ids)}) FOR UPDATE`,
    ),
    /** The live rows of `ids` ids. Parameters: namespace, ids, now (NULL: the server's clock). */
    get: sized(
      (ids) =>
        `SELECT ${RECORD_COLUMNS} FROM ${t} WHERE namespace = ? AND id IN (${marks(ids)}) ` +
        `AND ${LIVE_UNTIL} > COALESCE(?, ${NOW_MS})`,
    ),
    /**
     * Confirms the owners' in-flight claims (lapsed or not: one nobody took over is still its owner's), each with
     * its own result. Parameters: token, ttl, ttl, (id, result) per claim, namespace, ids, (id, owner) per claim.
     */
    confirm: sized((claims) => {
      const cases = new Array<string>(claims).fill('WHEN ? THEN ?').join(' ');
      return (
        `UPDATE ${t} SET token = ?, state = 'confirmed', expires_at = ${NOW_MS} + ?, ` +
        `forget_at = ${NOW_MS} + ?, lease_expires_at = NULL, owner = NULL, result = CASE id ${cases} END ` +
        `WHERE namespace = ? AND id IN (${marks(claims)}) AND state = 'in-flight' AND owner = CASE id ${cases} END`
      );
    }),
    /** Which of `ids` ids carry the token (a batch confirm's read-back). Parameters: namespace, ids, token. */
    withToken: sized(
      (ids) => `SELECT id FROM ${t} WHERE namespace = ? AND id IN (${marks(ids)}) AND token = ?`,
    ),
    /** One page of a namespace's rows in id order (live or not). Parameters: namespace, last id seen. */
    scan: sized(
      (limit) =>
        `SELECT ${RECORD_COLUMNS} FROM ${t} WHERE namespace = ? AND id > ? ORDER BY id LIMIT ${Math.trunc(limit)}`,
    ),
    /** Deletes up to `limit` rows of a namespace. Parameters: namespace. */
    clear: sized((limit) => `DELETE FROM ${t} WHERE namespace = ? LIMIT ${Math.trunc(limit)}`),
    /** Deletes up to `limit` rows past their `forget_at`, oldest first (the index's order: it reads what it deletes). */
    purge: sized(
      (limit) =>
        `DELETE FROM ${t} WHERE forget_at <= ${NOW_MS} ORDER BY forget_at LIMIT ${Math.trunc(limit)}`,
    ),
  };
}

export type Statements = ReturnType<typeof statements>;
