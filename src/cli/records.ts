import { existsSync, readFileSync } from 'node:fs';
import { loadConfig } from '../config/load.js';
import { openRepository } from '../config/repository.js';
import { REPLAY_EPOCH, replayEpochPrefix } from '../consumer/message-id.js';
import { storedOutcomeKind } from '../consumer/stored-outcome.js';
import { ConfigError, errorMessage, InvalidIdError } from '../errors.js';
import { configSource } from '../options/sources.js';
import { toKey } from '../store/ids.js';
import { isLive } from '../store/record.js';
import type { IdempotencyRecord, IdempotentRepository, MessageId } from '../store/types.js';
import { commandLine } from '../util/command-line.js';
import { type CliStreams, ExitCode, failWith } from './exit-code.js';
import { STDIN } from './lines.js';
import { cliConfigSchema, dedupDefaults } from './options.js';
import { chooseStore, describeStore } from './store-url.js';

// `idem inspect`, `idem forget` and `idem stats` use only the repository interface: every store answers alike.

/** How an id is written (arguments, `--ids`): `text`, the id itself; `hex`/`base64`, a binary id's bytes. */
export const idFormats = ['text', 'hex', 'base64'] as const;
export type IdFormat = (typeof idFormats)[number];

/** Ids per store round trip. */
const CHUNK = 500;

/** An id as the operator wrote it, and the id the store is asked about. */
export interface GivenId {
  readonly text: string;
  readonly id: MessageId;
}

/** Parses ids as written in `format`; one the format or no store allows is an InvalidIdError naming it. */
export function parseIds(
  texts: readonly string[],
  format: IdFormat = 'text',
  replayEpoch?: string,
): GivenId[] {
  if (replayEpoch !== undefined && !REPLAY_EPOCH.test(replayEpoch)) {
    throw new ConfigError('replayEpoch', 'must be letters, digits, ".", "_", ":" or "-" (at most 64)', {
      label: '--replay-epoch',
    });
  }
  const epoch = replayEpochPrefix(replayEpoch);
  return texts.map((text) => {
    let id: MessageId = text;
    if (format === 'hex') {
      if (!/^(?:[0-9a-fA-F]{2})+$/.test(text)) throw badId(text, 'is not hex (pairs of 0-9a-f)', format);
      id = Buffer.from(text, 'hex');
    } else if (format === 'base64') {
      if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) throw badId(text, 'is not base64', format);
      id = Buffer.from(text, 'base64');
    }
    try {
      // In an epoch the store holds the id as the consumer wrote it: the epoch's text before the canonical key.
      if (epoch !== undefined) id = epoch + toKey(id);
      toKey(id);
    } catch (error) {
      throw badId(text, errorMessage(error), format);
    }
    return { text, id };
  });
}

function badId(text: string, reason: string, format: IdFormat): InvalidIdError {
  const flag = format === 'text' ? '' : ` (--id-format ${format})`;
  return new InvalidIdError(`id ${JSON.stringify(text)}: ${reason}${flag}`);
}

/**
 * The ids of an `--ids` file, one a line ("-" reads stdin): a line is the id as it is (spaces kept), blank
 * lines and a final CR are dropped. An unreadable file is a ConfigError naming `--ids`.
 */
export function readIdsFile(path: string): string[] {
  let text: string;
  try {
    text = readFileSync(path === STDIN ? 0 : path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new ConfigError('ids', `cannot read ${path} (${reason})`, { label: '--ids' });
  }
  return text.split(/\r?\n|\r$/).filter((line) => line !== '');
}

/** What `idem inspect` says of one id. */
export type RecordStatus = 'absent' | 'in-flight' | 'confirmed' | 'failed-kept';

/** One id's record as `idem inspect` reports it. Times are epoch ms; the result only when asked for. */
export interface RecordReport {
  readonly id: string;
  readonly state: RecordStatus;
  readonly owner?: string;
  readonly leaseExpiresAt?: number;
  readonly expiresAt?: number;
  /** When the id was first seen; undefined for an absent id, null for a record written by 0.1.0. */
  readonly firstSeenAt?: number | null;
  readonly eventTime?: number;
  readonly fingerprint?: string;
  readonly resultKept: boolean;
  /** What the kept result is (a value, a failure, encrypted), when one is kept. */
  readonly resultKind?: ReturnType<typeof storedOutcomeKind>;
  readonly resultBytes?: number;
  /** The kept result as stored (its content can be personal data): only with `showResult`. */
  readonly result?: string;
}

/** The live record of each id, in the order given; `getMany` in chunks, so a long list is a few round trips. */
async function readRecords(
  repository: IdempotentRepository,
  ids: readonly GivenId[],
): Promise<(IdempotencyRecord | undefined)[]> {
  const records: (IdempotencyRecord | undefined)[] = [];
  for (let i = 0; i < ids.length; i += CHUNK) {
    records.push(...(await repository.getMany(ids.slice(i, i + CHUNK).map((g) => g.id))));
  }
  return records;
}

/** What the store holds for each id; one whose record expired (or whose lease lapsed) is `absent`. */
export async function inspectRecords(
  repository: IdempotentRepository,
  ids: readonly GivenId[],
  options: { readonly showResult?: boolean } = {},
): Promise<RecordReport[]> {
  const records = await readRecords(repository, ids);
  return ids.map((given, i) => report(given.text, records[i], options.showResult === true));
}

function report(id: string, record: IdempotencyRecord | undefined, showResult: boolean): RecordReport {
  if (record === undefined) return { id, state: 'absent', resultKept: false };
  const { result, owner, leaseExpiresAt, eventTime, fingerprint } = record;
  const kind = result === undefined ? undefined : storedOutcomeKind(result);
  const inFlight = record.state === 'in-flight';
  return {
    id,
    state: inFlight ? 'in-flight' : kind === 'failure' ? 'failed-kept' : 'confirmed',
    resultKept: result !== undefined,
    ...(inFlight && owner !== undefined && { owner }),
    ...(inFlight && leaseExpiresAt !== undefined && { leaseExpiresAt }),
    expiresAt: record.expiresAt,
    firstSeenAt: record.firstSeenAt ?? null,
    ...(eventTime !== undefined && { eventTime }),
    ...(fingerprint !== undefined && { fingerprint }),
    ...(result !== undefined && { resultKind: kind, resultBytes: Buffer.byteLength(result, 'utf8') }),
    ...(result !== undefined && showResult && { result }),
  };
}

/**
 * How `idem forget` ended for one id: `removed`, `absent` (nothing held it), `in-flight` (a claim kept
 * without `force`: its handler may still run) or `changed` (confirmed or taken over since read: kept).
 */
export type ForgetOutcome = 'removed' | 'absent' | 'in-flight' | 'changed';

/** One id's outcome of {@link forgetRecords}, with the state it was read in. */
export interface ForgetReport {
  readonly id: string;
  readonly outcome: ForgetOutcome;
  readonly was?: RecordStatus;
}

/**
 * Removes each id's record so that its next copy is processed again. An in-flight claim goes only with `force`
 * and under the owner read (`remove(id, owner)`); a confirmed record with `remove(id)`: only one that expired
 * and was claimed again between read and remove could lose that claim (docs/operations.md).
 */
export async function forgetRecords(
  repository: IdempotentRepository,
  ids: readonly GivenId[],
  options: { readonly force?: boolean } = {},
): Promise<ForgetReport[]> {
  const records = await readRecords(repository, ids);
  const reports: ForgetReport[] = [];
  const done = new Set<string>();
  for (let i = 0; i < ids.length; i++) {
    const given = ids[i] as GivenId;
    const record = records[i];
    const key = toKey(given.id);
    // An id listed twice is answered once; the second would read as absent after the first removed it.
    if (done.has(key)) continue;
    done.add(key);
    if (record === undefined) {
      reports.push({ id: given.text, outcome: 'absent' });
      continue;
    }
    const was = report(given.text, record, false).state;
    let outcome: ForgetOutcome;
    if (record.state !== 'in-flight') outcome = (await repository.remove(given.id)) ? 'removed' : 'absent';
    else if (!options.force || record.owner === undefined) outcome = 'in-flight';
    else outcome = (await repository.remove(given.id, record.owner)) ? 'removed' : 'changed';
    reports.push({ id: given.text, outcome, was });
  }
  return reports;
}

/** A usage error naming `--store`. */
const storeError = (message: string) => new ConfigError('store', message, { label: '--store' });

/**
 * What `idem stats` counts (docs/operations.md): live records by state, expired ones the store still holds,
 * the range of the live ones' expiry and first-seen times (epoch ms), and those written without a first-seen time.
 */
export interface StoreStats {
  readonly held: number;
  readonly byState: Record<Exclude<RecordStatus, 'absent'>, number>;
  readonly expired: number;
  readonly oldestExpiry?: number;
  readonly newestExpiry?: number;
  readonly oldestFirstSeen?: number;
  readonly newestFirstSeen?: number;
  readonly firstSeenUnknown?: number;
}

/** Counts what the store holds through its optional `scan` (without one, a ConfigError naming `--store`). */
export async function storeStats(repository: IdempotentRepository, now = Date.now()): Promise<StoreStats> {
  if (repository.scan === undefined) {
    throw storeError(
      'this store cannot list its ids (its repository has no scan); idem inspect looks up given ids',
    );
  }
  const byState = { 'in-flight': 0, confirmed: 0, 'failed-kept': 0 };
  let held = 0;
  let expired = 0;
  let oldest = Number.POSITIVE_INFINITY;
  let newest = Number.NEGATIVE_INFINITY;
  let firstOldest = Number.POSITIVE_INFINITY;
  let firstNewest = Number.NEGATIVE_INFINITY;
  let unknown = 0;
  await repository.scan((page) => {
    for (const record of page) {
      if (!isLive(record, now)) {
        expired++;
        continue;
      }
      held++;
      byState[report(record.id, record, false).state as keyof typeof byState]++;
      oldest = Math.min(oldest, record.expiresAt);
      newest = Math.max(newest, record.expiresAt);
      const seen = record.firstSeenAt;
      if (seen === undefined) unknown++;
      else [firstOldest, firstNewest] = [Math.min(firstOldest, seen), Math.max(firstNewest, seen)];
    }
  });
  if (held === 0) return { held, byState, expired };
  return {
    held,
    byState,
    expired,
    oldestExpiry: oldest,
    newestExpiry: newest,
    ...(unknown === held ? {} : { oldestFirstSeen: firstOldest, newestFirstSeen: firstNewest }),
    ...(unknown === 0 ? {} : { firstSeenUnknown: unknown }),
  };
}

/** Flags of `idem inspect`, `idem forget` and `idem stats`. */
export interface RecordsFlags {
  readonly store?: string;
  readonly config?: string;
  readonly ids?: string;
  readonly idFormat?: IdFormat;
  readonly replayEpoch?: string;
  readonly json?: boolean;
  readonly showResult?: boolean;
  readonly force?: boolean;
}

/**
 * Opens the store `--store` or the config names. Unlike `idem dedup`, nothing is assumed (no default
 * directory), so an operator never inspects or forgets in an empty one by mistake.
 */
export async function openNamedStore(
  flags: Pick<RecordsFlags, 'store' | 'config'>,
  onWarning: (message: string) => void,
): Promise<{ repository: IdempotentRepository; where: string }> {
  const config = await loadConfig(cliConfigSchema, flags.config === undefined ? {} : { path: flags.config });
  const info = configSource(config);
  const fromEnv = info?.env.some((entry) => entry.path[0] === 'repository') === true;
  if (flags.store === undefined && info?.file === undefined && !fromEnv) {
    throw storeError(
      'is required: the store to read, a RocksDB directory or a URL (or --config <file> naming it)',
    );
  }
  if (flags.store === dedupDefaults.memoryStore) {
    throw storeError('"memory" holds nothing outside the run that filled it');
  }
  chooseStore(config, flags.store);
  const section = config.repository as Record<string, unknown>;
  if (section.type === 'rocksdb' && !existsSync(String(section.path))) {
    throw new ConfigError('store', `no RocksDB store at ${String(section.path)}`, {
      label: flags.store === undefined ? 'repository.path' : '--store',
    });
  }
  return { repository: await openRepository(config, { onWarning }), where: describeStore(config) };
}

/** `idem inspect`, `idem forget` and `idem stats`: resolves to the exit code (docs/operations.md). */
export async function runRecords(
  command: 'inspect' | 'forget' | 'stats',
  args: readonly string[],
  flags: RecordsFlags,
  streams: CliStreams,
): Promise<number> {
  const name = `idem ${command}`;
  const fail = (error: unknown) => failWith(name, error, streams.err);
  let ids: GivenId[];
  let opened: { repository: IdempotentRepository; where: string };
  try {
    ids = command === 'stats' ? [] : givenIds(args, flags);
    opened = await openNamedStore(flags, (warning) => streams.err.write(`${commandLine(name, warning)}\n`));
  } catch (error) {
    return fail(error);
  }
  let code: number = ExitCode.ok;
  try {
    if (command === 'stats') {
      const stats = await storeStats(opened.repository);
      streams.out.write(flags.json ? `${JSON.stringify(isoTimes(stats, STATS_TIMES))}\n` : humanStats(stats));
      streams.err.write(`${name}: ${opened.where}\n`);
    } else if (command === 'inspect') {
      const reports = await inspectRecords(opened.repository, ids, { showResult: flags.showResult === true });
      for (const r of reports)
        streams.out.write(`${flags.json ? JSON.stringify(isoTimes(r, REPORT_TIMES)) : humanReport(r)}\n`);
      streams.err.write(`${name}: ${countsLine(reports.map((r) => r.state))}; ${opened.where}\n`);
    } else {
      const reports = await forgetRecords(opened.repository, ids, { force: flags.force === true });
      for (const r of reports) streams.out.write(`${flags.json ? JSON.stringify(r) : humanForget(r)}\n`);
      const kept = reports.filter((r) => r.outcome === 'in-flight' || r.outcome === 'changed').length;
      streams.err.write(
        `${name}: ${countsLine(reports.map((r) => r.outcome))}` +
          `${kept > 0 ? ` (in-flight ids are kept unless --force)` : ''}; ${opened.where}\n`,
      );
      // Some ids are still held: a script must not take the forget as done.
      if (kept > 0) code = ExitCode.invalidInput;
    }
  } catch (error) {
    code = fail(error);
  } finally {
    try {
      await opened.repository.close();
    } catch (error) {
      streams.err.write(`${commandLine(name, `closing the store: ${errorMessage(error)}`)}\n`);
      code = ExitCode.failure;
    }
  }
  return code;
}

/** The ids of the arguments and `--ids`, parsed; none at all is a usage error naming `--ids`. */
function givenIds(args: readonly string[], flags: RecordsFlags): GivenId[] {
  const texts = [...args, ...(flags.ids === undefined ? [] : readIdsFile(flags.ids))];
  if (texts.length === 0) {
    throw new ConfigError('ids', 'no ids: give them as arguments or one a line in --ids <file>', {
      label: '--ids',
    });
  }
  return parseIds(texts, flags.idFormat, flags.replayEpoch);
}

/** `3 confirmed, 1 absent`, in the order first met. */
function countsLine(values: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  return [...counts].map(([v, n]) => `${n} ${v}`).join(', ');
}

const iso = (ms: number) => new Date(ms).toISOString();

/** An id as printed in human output: as it is, or JSON-quoted when it has spaces or control characters. */
function shownId(id: string): string {
  return /^[^\s"\\\p{Cc}]+$/u.test(id) ? id : JSON.stringify(id);
}

const STATS_TIMES = ['oldestExpiry', 'newestExpiry', 'oldestFirstSeen', 'newestFirstSeen'];
const REPORT_TIMES = ['leaseExpiresAt', 'expiresAt', 'firstSeenAt', 'eventTime'];

/** A copy of `value` with the epoch-ms times at `keys` as ISO 8601 text: the NDJSON form. */
function isoTimes(value: object, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = { ...value };
  for (const key of keys) if (typeof out[key] === 'number') out[key] = iso(out[key]);
  return out;
}

function humanStats(stats: StoreStats): string {
  const lines = [`ids held: ${stats.held}`];
  for (const [state, n] of Object.entries(stats.byState)) lines.push(`  ${state.padEnd(12)} ${n}`);
  lines.push(`expired, not yet removed: ${stats.expired}`);
  if (stats.oldestExpiry !== undefined) lines.push(`oldest expiry: ${iso(stats.oldestExpiry)}`);
  if (stats.newestExpiry !== undefined) lines.push(`newest expiry: ${iso(stats.newestExpiry)}`);
  if (stats.oldestFirstSeen !== undefined) lines.push(`oldest first seen: ${iso(stats.oldestFirstSeen)}`);
  if (stats.newestFirstSeen !== undefined) lines.push(`newest first seen: ${iso(stats.newestFirstSeen)}`);
  if (stats.firstSeenUnknown !== undefined) {
    lines.push(`first seen unknown (written by an older version): ${stats.firstSeenUnknown}`);
  }
  return `${lines.join('\n')}\n`;
}

function humanReport(r: RecordReport): string {
  const parts: string[] = [r.state];
  if (r.owner !== undefined) parts.push(`owner ${r.owner}`);
  if (r.leaseExpiresAt !== undefined) parts.push(`lease until ${iso(r.leaseExpiresAt)}`);
  if (r.expiresAt !== undefined) parts.push(`expires ${iso(r.expiresAt)}`);
  if (r.firstSeenAt !== undefined) {
    parts.push(
      `first seen ${r.firstSeenAt === null ? 'unknown (written by an older version)' : iso(r.firstSeenAt)}`,
    );
  }
  if (r.eventTime !== undefined) parts.push(`event time ${iso(r.eventTime)}`);
  if (r.fingerprint !== undefined) parts.push(`fingerprint ${r.fingerprint}`);
  if (r.resultKept) parts.push(`result kept (${r.resultKind}, ${r.resultBytes} bytes)`);
  else if (r.state !== 'absent') parts.push('no result kept');
  if (r.result !== undefined) parts.push(`result ${JSON.stringify(r.result)}`);
  return `${shownId(r.id)}  ${parts.join('; ')}`;
}

function humanForget(r: ForgetReport): string {
  const text: Record<ForgetOutcome, string> = {
    removed: `removed (was ${r.was})`,
    absent: 'absent (nothing to remove)',
    'in-flight': 'kept: in-flight, its handler may still run (--force removes the claim)',
    changed: 'kept: its claim was confirmed or taken over since it was read',
  };
  return `${shownId(r.id)}  ${text[r.outcome]}`;
}
