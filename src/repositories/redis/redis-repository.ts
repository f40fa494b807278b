import type { Cluster, Redis } from 'ioredis';
import { ConfigError, errorMessage, RepositoryError } from '../../errors.js';
import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../../store/base.js';
import { toKey } from '../../store/ids.js';
import {
  decodeRecord,
  encodeEntryTail,
  encodeField,
  encodeRecord,
  hasOwnFields,
  newRecord,
  storeLifetimeMs,
} from '../../store/record.js';
import type { AddOptions, AddResult, IdempotencyRecord, MarkOptions, MessageId } from '../../store/types.js';
import { ifLive, serverClock, sharedStoreCapabilities } from '../shared.js';
import { closeClient, connectClient, createClient } from './connection.js';
import { globEscape, namespaceSegment } from './keys.js';
import { parseRedisOptions, type RedisRepositoryOptions, redisDefaults } from './options.js';
import { defineScripts, type ScriptedClient } from './scripts.js';
import { serverTime } from './server-time.js';

/** Options for wrapping a client the caller already has. */
export interface RedisClientRepositoryOptions {
  /** A standalone `Redis` or a `Cluster`; the repository defines its Lua scripts on it. */
  readonly client: Redis | Cluster;
  readonly keyPrefix?: string;
  /** Close the client on `close()`. Default false: a borrowed client stays the caller's to close. */
  readonly closeClient?: boolean;
  /** Accepted like every repository's, never judged by: leases and TTLs count on the server's clock. */
  readonly clock?: () => number;
}

/** Keys per script call (a script blocks the server while it runs), all sent at once; also the SCAN page size. */
const KEYS_PER_SCRIPT = 1_000;

/** The caller's time, or '' (`serverClock`'s NaN) for the server's TIME. */
function timeArg(now: number): number | '' {
  return Number.isNaN(now) ? '' : now;
}

/** Until the store may forget the record (`forgetAt`), at least 1 ms (PX 0 is an error). */
function pxFor(options: AddOptions): number {
  return Math.max(1, Math.ceil(storeLifetimeMs(newRecord('', {}, options, 0), 0, options.minLifetimeMs)));
}

/** No entry carries event time, fingerprint or result: their records share one encoded tail. */
function isPlain(entries: readonly KeyedEntry[]): boolean {
  return entries.every((e) => !hasOwnFields(e, e.result));
}

/** One script call's reply and the slice of the batch's keys it covered. */
interface Reply {
  readonly from: number;
  readonly to: number;
  readonly reply: unknown[];
}

/** Claim and confirm replies `[now, i, x, j, y...]` as each key's time, and batch index → the odd key's answer. */
function sparse<R>(replies: readonly Reply[], count: number): { nows: number[]; odd: Map<number, R> } {
  const nows = new Array<number>(count);
  const odd = new Map<number, R>();
  for (const { from, to, reply } of replies) {
    nows.fill(reply[0] as number, from, to);
    for (let j = 1; j < reply.length; j += 2) odd.set(from + (reply[j] as number) - 1, reply[j + 1] as R);
  }
  return { nows, odd };
}

/**
 * Repository on Redis (standalone or Cluster) through ioredis; see docs/redis.md. Every state change is one atomic
 * Lua script judged by the server's clock (unless the caller gives `now`); PX only collects garbage. A borrowed
 * Cluster should enable auto-pipelining, which batches route by. Lazy marks never overwrite a live record.
 */
export class RedisRepository extends BaseRepository {
  // Strings hold up to 512 MB, but a large value blocks the single-threaded server while it is copied.
  readonly capabilities = sharedStoreCapabilities({ nativeBatch: true, maxResultBytes: 1_048_576 });
  protected readonly storeName = 'redis';
  readonly #client: ScriptedClient;
  readonly #prefix: string;
  /** What every key of this namespace starts with (see {@link namespaceSegment}). */
  readonly #ns: string;
  readonly #ownsClient: boolean;
  readonly #serverTime: () => Promise<number>;

  /** Wraps an existing client (see {@link RedisRepository.open}). */
  constructor(options: RedisClientRepositoryOptions) {
    super({ clock: serverClock });
    this.#client = defineScripts(options.client);
    this.#prefix = options.keyPrefix ?? redisDefaults.keyPrefix;
    // An empty prefix would make clear() delete the whole database.
    if (typeof this.#prefix !== 'string' || this.#prefix.length === 0) {
      throw new ConfigError('repository.keyPrefix', 'must be a non-empty string');
    }
    this.#ns = namespaceSegment(this.#prefix);
    this.#ownsClient = options.closeClient ?? false;
    this.#serverTime = serverTime(options.client);
  }

  /** Connects from config options; the repository owns (and closes) its client. */
  static async open(options: RedisRepositoryOptions): Promise<RedisRepository> {
    const { clock, ...config } = options;
    const parsed = parseRedisOptions(config);
    const client = createClient(parsed);
    await connectClient(client, parsed);
    return new RedisRepository({ client, keyPrefix: parsed.keyPrefix, closeClient: true, clock });
  }

  get client(): Redis | Cluster {
    return this.#client;
  }

  get keyPrefix(): string {
    return this.#prefix;
  }

  /** The Redis key that holds the id's record (for inspection with redis-cli). */
  redisKey(id: MessageId): string {
    return this.#ns + toKey(id, this.maxIdBytes);
  }

  /** ioredis' offline-queue wording replaced by what it means for the caller. */
  protected override run<T>(operation: string, call: () => Promise<T>): Promise<T> {
    return super.run(operation, () =>
      call().catch((error: unknown) => {
        const detail = errorMessage(error);
        if (!/isn't writeable|Connection is closed|MaxRetriesPerRequest/.test(detail)) throw error;
        throw new RepositoryError(
          `redis ${operation} failed: not connected to the server (the client reconnects by itself; ` +
            `retry later): ${detail}`,
          { cause: error },
        );
      }),
    );
  }

  protected async doAddMany(entries: readonly KeyedEntry[], options: AddOptions, now: number) {
    const given = timeArg(now);
    const { nows, odd } = await this.#claim(entries, options, given);
    // A plain batch's new records differ only in id (and, on a Cluster, in the node's time): one template per time.
    const plain = isPlain(entries);
    let template: IdempotencyRecord | undefined;
    return entries.map((entry, i): AddResult => {
      const old = odd.get(i);
      if (old !== undefined) return { added: false, existing: decodeRecord(entry.key, old) };
      const at = given === '' ? (nows[i] as number) : now;
      if (!plain) return { added: true, record: newRecord(entry.key, entry, options, at) };
      if (template === undefined || template.expiresAt !== at + options.ttlMs) {
        template = newRecord('', {}, options, at);
      }
      return { added: true, record: { ...template, id: entry.key } };
    });
  }

  /** The keys that hold a live record, with its text. */
  async #claim(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    given: number | '',
  ): Promise<{ nows: number[]; odd: Map<number, string> }> {
    // A record written confirmed has no owner.
    const owner = options.leaseMs === undefined ? '' : encodeField(options.owner);
    const args = [given, pxFor(options), options.ttlMs, options.leaseMs ?? '', owner];
    // Plain ids share one record tail, sent once per script call rather than per key.
    const tails = isPlain(entries) ? [] : [entries.map(encodeEntryTail)];
    if (tails.length === 0) args.push(encodeEntryTail({}));
    const keys = entries.map((e) => this.#ns + e.key);
    return sparse(await this.#calls('idemClaim', keys, args, tails), keys.length);
  }

  protected override async doMarkMany(entries: readonly KeyedEntry[], options: MarkOptions, now: number) {
    if (!this.#client.isCluster) {
      const { odd } = await this.#claim(entries, options, timeArg(now));
      return entries.map((_, i) => !odd.has(i));
    }
    const at = Number.isNaN(now) ? await this.#serverTime() : now;
    const px = pxFor(options);
    // The encoding holds no id: ids without event time or fingerprint share one value.
    const shared = isPlain(entries) ? encodeRecord(newRecord('', {}, options, at)) : undefined;
    // Auto-pipelining groups these into one pipeline per node (a pipeline may not span slots).
    const value = (e: KeyedEntry) => shared ?? encodeRecord(newRecord(e.key, e, options, at));
    const set = (e: KeyedEntry) => this.#client.set(this.#ns + e.key, value(e), 'PX', px, 'NX');
    const marked = (await Promise.all(entries.map(set))).map((reply) => reply !== null);
    const taken = marked.flatMap((ok, i) => (ok ? [] : [i]));
    if (taken.length === 0) return marked;
    // Rare: the key exists. The claim script judges it (server clock) and replaces it only when no longer live.
    const existing = taken.map((i) => entries[i] as KeyedEntry);
    const added = await this.doAddMany(existing, options, now);
    for (let k = 0; k < taken.length; k++) marked[taken[k] as number] = (added[k] as AddResult).added;
    return marked;
  }

  protected async doGetMany(keys: readonly string[], now: number) {
    const full = keys.map((k) => this.#ns + k);
    const decode = (text: string | null, i: number, at: number) =>
      text == null ? undefined : ifLive(decodeRecord(keys[i] as string, text), at);
    if (timeArg(now) === '') {
      // Judged by the server's clock, read in the same script as the records (one call per 1000 keys).
      const replies = await this.#calls('idemRead', full, [], []);
      const records = new Array<IdempotencyRecord | undefined>(full.length);
      for (const { from, to, reply } of replies) {
        for (let i = from; i < to; i++)
          records[i] = decode(reply[i - from + 1] as string | null, i, reply[0] as number);
      }
      return records;
    }
    return (await this.#getAll(full)).map((text, i) => decode(text, i, now));
  }

  protected async doConfirmMany(claims: readonly KeyedClaim[], ttlMs: number, now: number) {
    const px = Math.max(1, Math.ceil(ttlMs));
    const keys = claims.map((c) => this.#ns + c.key);
    const owners = claims.map((c) => encodeField(c.owner));
    // The script puts the result between the fingerprint and the first-seen time (see CONFIRM_LUA).
    const results = claims.map((c) => (c.result === undefined ? '' : encodeField(c.result)));
    const replies = await this.#calls('idemConfirm', keys, [timeArg(now), ttlMs, px], [owners, results]);
    const { odd } = sparse<number>(replies, keys.length);
    return claims.map((_, i) => !odd.has(i));
  }

  protected override async doRenew(key: string, owner: string, leaseMs: number, now: number) {
    return (await this.#client.idemRenew(this.#ns + key, timeArg(now), leaseMs, encodeField(owner))) === 1;
  }

  protected async doRemove(key: string, owner: string | undefined): Promise<boolean> {
    const full = this.#ns + key;
    if (owner === undefined) return (await this.#client.del(full)) > 0;
    return (await this.#client.idemRelease(full, encodeField(owner))) === 1;
  }

  protected async doClear(): Promise<void> {
    const { nodes, pattern, strip } = this.#scanTarget();
    await Promise.all(
      nodes.map((node) =>
        scanAll(node, pattern, async (found) => {
          const keys = found.map((key) => key.subarray(strip));
          if (!this.#client.isCluster) return void (await node.unlink(...keys));
          // Keys on one node span many slots, and a multi-key UNLINK must stay in one slot: unlink per key.
          const pipe = node.pipeline();
          for (const key of keys) pipe.unlink(key);
          const results = await pipe.exec();
          if (results === null) throw new RepositoryError('redis pipeline was discarded');
          for (const [error] of results) if (error) throw error;
        }),
      ),
    );
  }

  /** SCAN over the namespace's keys (each master in turn), then their values; a key expired meanwhile is left out. */
  async scan(onPage: (records: readonly IdempotencyRecord[]) => void | Promise<void>): Promise<void> {
    this.assertOpen();
    const { nodes, pattern, strip } = this.#scanTarget();
    const keyStart = strip + Buffer.byteLength(this.#ns);
    for (const node of nodes) {
      await this.run('scan', () =>
        scanAll(node, pattern, async (found) => {
          const texts = await this.#getAll(found.map((k) => k.subarray(strip)));
          const id = (i: number) => (found[i] as Buffer).subarray(keyStart).toString('utf8');
          const records = texts.flatMap((text, i) => (text == null ? [] : [decodeRecord(id(i), text)]));
          if (records.length > 0) await onPage(records);
        }),
      );
    }
  }

  /** One MGET, or on a cluster one GET per key (a multi-key MGET must stay in one slot). */
  #getAll(keys: (string | Buffer)[]): Promise<(string | null)[]> {
    return this.#client.isCluster
      ? Promise.all(keys.map((k) => this.#client.get(k)))
      : this.#client.mget(keys);
  }

  protected async doClose(): Promise<void> {
    if (this.#ownsClient) await closeClient(this.#client);
  }

  /**
   * The nodes to SCAN and this namespace's pattern. ioredis adds a client's keyPrefix to key arguments, not to
   * SCAN's pattern or results: it is added to the pattern, and found keys lose their first `strip` bytes.
   */
  #scanTarget(): { nodes: Redis[]; pattern: string; strip: number } {
    const clientPrefix = this.#client.options.keyPrefix ?? '';
    return {
      nodes: this.#client.isCluster ? (this.#client as Cluster).nodes('master') : [this.#client as Redis],
      pattern: `${globEscape(clientPrefix + this.#ns)}*`,
      strip: Buffer.byteLength(clientPrefix),
    };
  }

  /**
   * Runs a script over `keys` (`args` for all, one value per key from each of `perKey`): `<script>One` for one key
   * or per key on a Cluster, else one call per KEYS_PER_SCRIPT keys.
   */
  async #calls(
    script: 'idemClaim' | 'idemConfirm' | 'idemRead',
    keys: readonly string[],
    args: readonly (string | number)[],
    perKey: readonly (readonly string[])[],
  ): Promise<Reply[]> {
    const client = this.#client;
    // Each call is written to the socket as it is made, not gathered into a pipeline first.
    const call = async (from: number, to: number): Promise<Reply> => {
      const slices = perKey.map((values) => values.slice(from, to));
      const reply =
        to - from === 1
          ? await client[`${script}One`](keys[from] as string, ...args, ...slices)
          : await client[script](to - from, keys.slice(from, to), ...args, ...slices);
      return { from, to, reply: reply as unknown[] };
    };
    const n = keys.length;
    if (n === 1) return [await call(0, 1)];
    const step = client.isCluster ? 1 : KEYS_PER_SCRIPT;
    const calls: Promise<Reply>[] = [];
    for (let from = 0; from < n; from += step) calls.push(call(from, Math.min(n, from + step)));
    return Promise.all(calls);
  }
}

async function scanAll(
  node: Redis,
  pattern: string,
  onPage: (keys: Buffer[]) => Promise<void>,
): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scanBuffer(cursor, 'MATCH', pattern, 'COUNT', KEYS_PER_SCRIPT);
    cursor = next.toString();
    if (keys.length > 0) await onPage(keys);
  } while (cursor !== '0');
}
