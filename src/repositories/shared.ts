import type { z } from 'zod';
import { parseOptions } from '../options/issues.js';
import type { TlsOptions } from '../options/tls.js';
import { MAX_ID_BYTES } from '../store/ids.js';
import { isLive } from '../store/record.js';
import type { IdempotencyRecord, RecordState, RepositoryCapabilities } from '../store/types.js';

/** Where a store reports a degraded but working setup (an emulator without TTL, a clock skew allowed by "warn"). */
export interface StoreLogger {
  warn(message: string): void;
}

/** The default {@link StoreLogger}: a process warning with `code`, visible and filterable, never silent. */
export function processWarnings(code: string): StoreLogger {
  return { warn: (message) => process.emitWarning(message, { code }) };
}

/** `parse<Store>Options(input, owner?)`: options given in code, a bad one a ConfigError keyed `repository.<key>`. */
export function storeOptionsParser<Schema extends z.ZodType>(
  schema: Schema,
  defaultOwner: string,
): (input: unknown, owner?: string) => z.output<Schema> {
  return (input, owner = defaultOwner) =>
    parseOptions(schema, input, { kind: 'code', owner, prefix: ['repository'] });
}

/** The capabilities of a persistent store (by default one that several processes share); the rest is `more`. */
export function sharedStoreCapabilities(
  more: Pick<RepositoryCapabilities, 'nativeBatch' | 'maxResultBytes' | 'maxTtlMs'> & { shared?: boolean },
): RepositoryCapabilities {
  return { persistent: true, shared: true, maxIdBytes: MAX_ID_BYTES, ...more };
}

/** The record if it is still live at `now`, else undefined: stores keep records past their end until collected. */
export function ifLive(record: IdempotencyRecord | undefined, now: number): IdempotencyRecord | undefined {
  return record !== undefined && isLive(record, now) ? record : undefined;
}

/** `items` cut into runs of at most `size`, for a server's per-call limit. */
export function chunk<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size));
  return chunks;
}

/** Node TLS options of a `tls` setting, certificates verified unless turned off by name; undefined for no TLS. */
export function verifiedTls(tls: boolean | TlsOptions | undefined): TlsOptions | undefined {
  if (tls === undefined || tls === false) return undefined;
  const settings = tls === true ? {} : tls;
  return { ...settings, rejectUnauthorized: settings.rejectUnauthorized ?? true };
}

type OptionalFields = Omit<IdempotencyRecord, 'id' | 'state' | 'expiresAt'>;

/** A record from a stored row's cells; a null or undefined cell leaves its field out. */
export function recordOf(
  id: string,
  state: RecordState,
  expiresAt: number,
  cells: { readonly [K in keyof OptionalFields]?: OptionalFields[K] | null | undefined },
): IdempotencyRecord {
  const record: { -readonly [K in keyof IdempotencyRecord]: IdempotencyRecord[K] } = { id, state, expiresAt };
  if (cells.leaseExpiresAt != null) record.leaseExpiresAt = cells.leaseExpiresAt;
  if (cells.owner != null) record.owner = cells.owner;
  if (cells.eventTime != null) record.eventTime = cells.eventTime;
  if (cells.fingerprint != null) record.fingerprint = cells.fingerprint;
  if (cells.result != null) record.result = cells.result;
  if (cells.firstSeenAt != null) record.firstSeenAt = cells.firstSeenAt;
  return record;
}

/**
 * True when a stored record is exactly the claim `ours` (same owner, state and times): an earlier attempt of this
 * very write landed and only its answer was lost (a timeout, a retry), so the caller reports it as its own.
 */
export function isSameClaim(stored: IdempotencyRecord | undefined, ours: IdempotencyRecord): boolean {
  return (
    stored !== undefined &&
    stored.state === ours.state &&
    stored.owner === ours.owner &&
    stored.expiresAt === ours.expiresAt &&
    stored.leaseExpiresAt === ours.leaseExpiresAt
  );
}
