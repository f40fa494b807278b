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

/** The clock of a store judged by its server's clock: NaN, a `now` the store sends as "the server's time". */
export const serverClock = (): number => Number.NaN;

/** The record if it is still live at `now`, else undefined: stores keep records past their end until collected. */
export function ifLive(record: IdempotencyRecord | undefined, now: number): IdempotencyRecord | undefined {
  return record !== undefined && isLive(record, now) ? record : undefined;
}

/** `items` cut into runs of at most `maxItems` and, with `sizeOf`, `maxBytes` (a larger item runs alone). */
export function chunk<T>(
  items: readonly T[],
  maxItems: number,
  sizeOf?: (item: T) => number,
  maxBytes = 0,
): T[][] {
  const runs: T[][] = [];
  let run: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = sizeOf?.(item) ?? 0;
    if (run.length === maxItems || (run.length > 0 && sizeOf && bytes + size > maxBytes)) {
      runs.push(run);
      run = [];
      bytes = 0;
    }
    run.push(item);
    bytes += size;
  }
  if (run.length > 0) runs.push(run);
  return runs;
}

/** Node's and OpenSSL's error codes of a failed TLS handshake or certificate check (a RegExp source). */
export const TLS_ERROR_CODES = 'CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|ERR_TLS|ERR_SSL|EPROTO';

/** Node TLS options of a `tls` setting, certificates verified unless turned off by name; undefined for no TLS. */
export function verifiedTls(tls: boolean | TlsOptions | undefined): TlsOptions | undefined {
  if (tls === undefined || tls === false) return undefined;
  const settings = tls === true ? {} : tls;
  return { ...settings, rejectUnauthorized: settings.rejectUnauthorized ?? true };
}

/** The fields a record may leave out, each a time (epoch ms) or text, in the order stores lay out their columns. */
export const OPTIONAL_FIELDS = [
  ['leaseExpiresAt', 'time'],
  ['owner', 'text'],
  ['eventTime', 'time'],
  ['fingerprint', 'text'],
  ['result', 'text'],
  ['firstSeenAt', 'time'],
] as const satisfies readonly (readonly [keyof IdempotencyRecord, 'time' | 'text'])[];

/** A record from a stored row's cells; a null or undefined cell leaves its field out. */
export function recordOf(
  id: string,
  state: RecordState,
  expiresAt: number,
  cells: { readonly [K in (typeof OPTIONAL_FIELDS)[number][0]]?: IdempotencyRecord[K] | null | undefined },
): IdempotencyRecord {
  const record: Record<string, unknown> = { id, state, expiresAt };
  for (const [field] of OPTIONAL_FIELDS) if (cells[field] != null) record[field] = cells[field];
  return record as unknown as IdempotencyRecord;
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
