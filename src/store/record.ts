import type { AddEntry, AddOptions, IdempotencyRecord } from './types.js';

/** True while the record still counts: in-flight until its lease ends, confirmed until it expires. */
export function isLive(record: IdempotencyRecord, now: number): boolean {
  if (record.state === 'in-flight') return (record.leaseExpiresAt ?? 0) > now;
  return record.expiresAt > now;
}

/** True when the record is `owner`'s in-flight claim (what confirm, renew and an owner's remove may change). */
export function isClaimOf(record: IdempotencyRecord | undefined, owner: string): record is IdempotencyRecord {
  return record?.state === 'in-flight' && record.owner === owner;
}

/** True when a record or entry has an event time, fingerprint or result: it cannot share a bare record's form. */
export function hasOwnFields(fields: Omit<AddEntry, 'id' | 'result'>, result: string | undefined): boolean {
  return fields.eventTime !== undefined || fields.fingerprint !== undefined || result !== undefined;
}

/** The record `add` writes for a new id. */
export function newRecord(
  key: string,
  entry: Omit<AddEntry, 'id'>,
  options: AddOptions,
  now: number,
): IdempotencyRecord {
  const claim = options.leaseMs !== undefined;
  // Fields assigned one by one: spreads of conditional objects cost temporary objects on every store's hot path.
  const record: { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] } = {
    id: key,
    state: claim ? 'in-flight' : 'confirmed',
    expiresAt: now + options.ttlMs,
    firstSeenAt: now,
  };
  if (claim) {
    record.leaseExpiresAt = now + (options.leaseMs as number);
    record.owner = options.owner;
  }
  if (entry.eventTime !== undefined) record.eventTime = entry.eventTime;
  if (entry.fingerprint !== undefined) record.fingerprint = entry.fingerprint;
  if (!claim && entry.result !== undefined) record.result = entry.result;
  return record;
}

/** The record after its owner confirms it: retention restarts from the confirmation; `result` is kept with it. */
export function confirmedRecord(
  record: IdempotencyRecord,
  ttlMs: number,
  now: number,
  result?: string,
): IdempotencyRecord {
  const confirmed: { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] } = {
    id: record.id,
    state: 'confirmed',
    expiresAt: now + ttlMs,
  };
  if (record.eventTime !== undefined) confirmed.eventTime = record.eventTime;
  if (record.fingerprint !== undefined) confirmed.fingerprint = record.fingerprint;
  if (result !== undefined) confirmed.result = result;
  if (record.firstSeenAt !== undefined) confirmed.firstSeenAt = record.firstSeenAt;
  return confirmed;
}

/** The owner's in-flight record with its lease extended to `now + leaseMs` (see `IdempotentRepository.renew`). */
export function renewedRecord(record: IdempotencyRecord, leaseMs: number, now: number): IdempotencyRecord {
  return { ...record, leaseExpiresAt: now + leaseMs };
}

/**
 * The time after which the store may forget the record (store-side TTLs and buckets). An in-flight record is
 * kept until the later of its lease end and its retention end: that blocks no one (liveness is judged from the
 * lease), and lets an owner whose handler outlived the lease still confirm while nobody took the id over.
 */
export function forgetAt(record: IdempotencyRecord): number {
  if (record.state === 'confirmed') return record.expiresAt;
  return Math.max(record.leaseExpiresAt ?? record.expiresAt, record.expiresAt);
}

/** Wall-clock ms from the write a store keeps the record: until {@link forgetAt}, at least `minLifetimeMs`. */
export function storeLifetimeMs(record: IdempotencyRecord, now: number, minLifetimeMs = 0): number {
  return Math.max(forgetAt(record) - now, minLifetimeMs);
}

/** Separates the fields of an encoded record; never appears inside an encoded field. */
const FIELD_SEP = '\u0001';
/** Escape lead inside a field: `\2\2` is U+0002, `\2\3` is U+0001, a field that is just `\2` is the empty string. */
const ESC = '\u0002';
/** What `\2` + this character stands for inside a field. */
const UNESCAPE: Readonly<Record<string, string>> = { [ESC]: ESC, '\u0003': FIELD_SEP };

/** An optional string as a field that round-trips and never contains {@link FIELD_SEP} (see {@link ESC}). */
export function encodeField(value: string | undefined): string {
  if (value === undefined) return '';
  if (value === '') return ESC;
  return value.includes(FIELD_SEP) || value.includes(ESC)
    ? value.replaceAll(ESC, `${ESC}${ESC}`).replaceAll(FIELD_SEP, `${ESC}\u0003`)
    : value;
}

/** Inverse of {@link encodeField}. */
function decodeField(field: string | undefined): string | undefined {
  if (field === undefined || field === '') return undefined;
  if (field === ESC) return '';
  if (!field.includes(ESC)) return field;
  let text = '';
  for (let i = 0; i < field.length; i++) {
    const c = field[i] as string;
    text += c === ESC ? (UNESCAPE[field[++i] as string] ?? '') : c;
  }
  return text;
}

/**
 * Compact text form for key-value stores (Redis, RocksDB): fields joined by U+0001, strings through
 * {@link encodeField}. Order: state (`f` in-flight, `c` confirmed), expiresAt, leaseExpiresAt, owner,
 * eventTime, fingerprint, result, firstSeenAt. Records of older versions lack the last two fields (or the last
 * one) and decode without them; a version that knows seven fields ignores the eighth.
 */
export function encodeRecord(record: IdempotencyRecord): string {
  return (
    (record.state === 'in-flight' ? 'f' : 'c') +
    FIELD_SEP +
    record.expiresAt +
    FIELD_SEP +
    (record.leaseExpiresAt ?? '') +
    FIELD_SEP +
    encodeField(record.owner) +
    FIELD_SEP +
    encodeRecordTail(record)
  );
}

/**
 * The last fields of {@link encodeRecord}; a record with neither a result nor a first-seen time (an older
 * version's) keeps its old, shorter form.
 */
function encodeRecordTail(record: IdempotencyRecord): string {
  if (record.firstSeenAt !== undefined) return encodeEntryTail(record) + FIELD_SEP + record.firstSeenAt;
  if (record.result !== undefined) return encodeEntryTail(record);
  return (record.eventTime ?? '') + FIELD_SEP + encodeField(record.fingerprint);
}

/**
 * An add entry's fields of {@link encodeRecord} (eventTime, fingerprint, result), for a store that writes the
 * others itself (the Redis claim script: the times from the server's clock).
 */
export function encodeEntryTail(entry: Omit<AddEntry, 'id'>): string {
  return (
    (entry.eventTime ?? '') +
    FIELD_SEP +
    encodeField(entry.fingerprint) +
    FIELD_SEP +
    encodeField(entry.result)
  );
}

/** Inverse of {@link encodeRecord}. */
export function decodeRecord(key: string, text: string): IdempotencyRecord {
  const [state, expiresAt, lease, owner, eventTime, fingerprint, result, firstSeenAt] = text.split(FIELD_SEP);
  const record: { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] } = {
    id: key,
    state: state === 'f' ? 'in-flight' : 'confirmed',
    expiresAt: Number(expiresAt),
  };
  if (lease) record.leaseExpiresAt = Number(lease);
  const ownerText = decodeField(owner);
  if (ownerText !== undefined) record.owner = ownerText;
  if (eventTime) record.eventTime = Number(eventTime);
  const fingerprintText = decodeField(fingerprint);
  if (fingerprintText !== undefined) record.fingerprint = fingerprintText;
  const resultText = decodeField(result);
  if (resultText !== undefined) record.result = resultText;
  if (firstSeenAt) record.firstSeenAt = Number(firstSeenAt);
  return record;
}
