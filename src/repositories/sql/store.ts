import { errorMessage, RepositoryError } from '../../errors.js';
import type { IdempotencyRecord } from '../../store/types.js';
import { redactText } from '../../util/redact-text.js';

/** Options of a SQL store's `purge()`. */
export interface PurgeOptions {
  /** Rows one DELETE statement removes at most (default: the `purgeBatchSize` option). */
  readonly batchSize?: number;
  /** Stop after this many statements even if more rows are due (default: until a batch comes back short). */
  readonly maxBatches?: number;
}

/** A row's record columns as the driver returns them, `Text` its type for text. */
export interface SqlRecordRow<Text> {
  readonly state: string | null;
  readonly expires_at: number | string | null;
  readonly lease_expires_at: number | string | null;
  readonly owner: Text | null;
  readonly event_time: number | string | null;
  readonly fingerprint: Text | null;
  readonly result: Text | null;
  /** Null on a row written by a version that did not keep it. */
  readonly first_seen_at: number | string | null;
}

export function decodeRecord<Text>(
  id: string,
  row: SqlRecordRow<Text>,
  text: (stored: Text) => string,
): IdempotencyRecord {
  const record: { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] } = {
    id,
    state: row.state === 'in-flight' ? 'in-flight' : 'confirmed',
    expiresAt: Number(row.expires_at),
  };
  if (row.lease_expires_at !== null) record.leaseExpiresAt = Number(row.lease_expires_at);
  if (row.owner !== null) record.owner = text(row.owner);
  if (row.event_time !== null) record.eventTime = Number(row.event_time);
  if (row.fingerprint !== null) record.fingerprint = text(row.fingerprint);
  if (row.result !== null) record.result = text(row.result);
  if (row.first_seen_at != null) record.firstSeenAt = Number(row.first_seen_at);
  return record;
}

/** The first line of a driver error's message, any credential it might quote replaced. */
export function detailOf(error: unknown): string {
  return redactText(errorMessage(error).split('\n')[0] ?? '');
}

/** `idem migrate`'s shell-quoted `--store` (the URL without password, or a template), and what to add to it. */
export interface MigrateStore {
  readonly arg: string;
  readonly note: string;
}

/** {@link MigrateStore} for `url`; `passwordOption`: a password was configured apart from the URL. */
export function migrateStore(
  store: 'postgres' | 'mysql',
  url: string | undefined,
  passwordOption: boolean,
): MigrateStore {
  let u: URL;
  try {
    u = new URL(url ?? '');
  } catch {
    return {
      arg: shellQuote(`${store}://<user>@<host>:<port>/<database>`),
      note: "fill in your server's URL",
    };
  }
  const hadPassword = u.password !== '' || u.searchParams.has('password') || passwordOption;
  u.password = '';
  u.searchParams.delete('password');
  if (!hadPassword) return { arg: shellQuote(u.href), note: '' };
  if (store === 'postgres') return { arg: shellQuote(u.href), note: 'with the password in PGPASSWORD' };
  const userinfo = `${u.username}:<password>@`;
  const bare = `${u.protocol}//${u.username === '' ? '' : userinfo}${u.host}${u.pathname}${u.search}`;
  return { arg: shellQuote(bare), note: 'with the password filled in' };
}

function shellQuote(text: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}

export function migrateHint(store: string, table: string, target: MigrateStore, verb = 'create it'): string {
  const flag = table === 'processed_ids' ? '' : ` --table ${table}`;
  const note = target.note === '' ? '' : `${target.note}; `;
  return (
    `${verb} with \`idem migrate --store ${target.arg}${flag} --apply\` (${note}without --apply it prints ` +
    `the DDL), migrate() from idempotent-consumer/${store}, or repository.createTable = true`
  );
}

export function tableInUse(store: string, table: string, error: unknown): RepositoryError {
  return new RepositoryError(
    `${store}: the table ${table} is in use: the migration waited for a lock that open transactions on it hold, ` +
      `until the lock timeout (${detailOf(error)}); run it again when they end`,
    { cause: error },
  );
}
