import type { Cluster, Redis } from 'ioredis';
import { ConfigError, RepositoryError } from '../../errors.js';
import { BaseRepository, type KeyedClaim, type KeyedEntry } from '../base.js';
import { MAX_ID_BYTES } from '../ids.js';
import { decodeRecord, encodeRecord, forgetAt, isLive, newRecord } from '../record.js';
import type { AddOptions, AddResult, IdempotencyRecord, RepositoryCapabilities } from '../types.js';
import { closeClient, connectClient, createClient } from './connection.js';
import { parseRedisOptions, type RedisRepositoryOptions, redisDefaults } from './options.js';
import { defineScripts, type ScriptCommands, type ScriptedClient, type ScriptedPipeline } from './scripts.js';

/** Options for wrapping a client the caller already has. */
export interface RedisClientRepositoryOptions {
  /** A standalone `Redis` or a `Cluster`; the repository defines its Lua scripts on it. */
  readonly client: Redis | Cluster;
  readonly keyPrefix?: string;
  /** Close the client on `close()`. Default false: a borrowed client stays the caller's to close. */
  readonly closeClient?: boolean;
  readonly clock?: () => number;
}

/**
 * Keys per script call. A script blocks the server while it runs, so a large batch is cut into calls of this
 * size, all sent in one pipeline (still one round trip).
 */
const KEYS_PER_SCRIPT = 1_000;
/** Keys per SCAN page and per UNLINK in `clear()`. */
const CLEAR_CHUNK = 1_000;

/** PX for a record: until the store may forget it, rounded up, at least 1 ms (PX 0 is an error). */
function pxFor(record: IdempotencyRecord, now: number): number {
  return Math.max(1, Math.ceil(forgetAt(record) - now));
}

/** Escapes glob metacharacters so a prefix matches itself in SCAN MATCH. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

/** Unwraps `pipeline.exec()` results, rethrowing the first command error. */
function pipelineResults(results: [Error | null, unknown][] | null): unknown[] {
  if (results === null) throw new RepositoryError('redis pipeline was discarded');
  return results.map(([error, value]) => {
    if (error) throw error;
    return value;
  });
}

/**
 * Repository on Redis (standalone or Cluster) through ioredis.
 *
 * Every state change is one atomic Lua script that compares state and owner on the server, with the client's
 * `now` as the only clock, so liveness is exact. Redis' own PX (from `forgetAt`) only collects garbage.
 * Standalone batches are one script call per 1000 keys in one round trip; on a Cluster, where one script may
 * not span slots, a batch is one script call per key, pipelined per node by ioredis' auto-pipelining (on for
 * clients the repository creates; a borrowed Cluster should enable it too).
 */
export class RedisRepository extends BaseRepository {
  readonly capabilities: RepositoryCapabilities = {
    persistent: true,
    shared: true,
    maxIdBytes: MAX_ID_BYTES,
    nativeBatch: true,
  };
  protected readonly storeName = 'redis';
  readonly #client: ScriptedClient;
  readonly #prefix: string;
  readonly #ownsClient: boolean;

  /** Wraps an existing client; see {@link RedisRepository.open} to connect from options. */
  constructor(options: RedisClientRepositoryOptions) {
    super(options);
    this.#client = defineScripts(options.client);
    this.#prefix = options.keyPrefix ?? redisDefaults.keyPrefix;
    // An empty prefix would make clear() delete the whole database.
    if (typeof this.#prefix !== 'string' || this.#prefix.length === 0) {
      throw new ConfigError('repository.keyPrefix', 'must be a non-empty string');
    }
    this.#ownsClient = options.closeClient ?? false;
  }

  /**
   * Connects from config options and returns a repository that owns (and closes) its client. Invalid options
   * reject with a ConfigError naming the key; an unreachable server with an error naming the address.
   */
  static async open(options: RedisRepositoryOptions): Promise<RedisRepository> {
    const { clock, ...config } = options;
    const parsed = parseRedisOptions(config);
    const client = createClient(parsed);
    await connectClient(client, parsed);
    return new RedisRepository({ client, keyPrefix: parsed.keyPrefix, closeClient: true, clock });
  }

  /** The underlying ioredis client. */
  get client(): Redis | Cluster {
    return this.#client;
  }

  /** The namespace prefix of every key. */
  get keyPrefix(): string {
    return this.#prefix;
  }

  /** Store failures, with ioredis' offline-queue wording replaced by what it means for the caller. */
  protected override run<T>(operation: string, call: () => Promise<T>): Promise<T> {
    return super.run(operation, () =>
      call().catch((error: unknown) => {
        const detail = error instanceof Error ? error.message : String(error);
        if (!/isn't writeable|Connection is closed|MaxRetriesPerRequest/.test(detail)) throw error;
        throw new RepositoryError(
          `redis ${operation} failed: not connected to the server (the client reconnects by itself; ` +
            `retry later): ${detail}`,
          { cause: error },
        );
      }),
    );
  }

  get #isCluster(): boolean {
    return this.#client.isCluster;
  }

  protected override async doAdd(entry: KeyedEntry, options: AddOptions, now: number): Promise<AddResult> {
    const record = newRecord(entry.key, entry, options, now);
    const key = this.#prefix + entry.key;
    const reply = (await this.#client.idemClaimOne(key, now, pxFor(record, now), encodeRecord(record))) as [
      string | null,
    ];
    const old = reply[0];
    return old == null ? { added: true, record } : { added: false, existing: decodeRecord(entry.key, old) };
  }

  protected async doAddMany(
    entries: readonly KeyedEntry[],
    options: AddOptions,
    now: number,
  ): Promise<AddResult[]> {
    // Every record of one batch has the same times and owner, hence the same PX, and ids without event time or
    // fingerprint share one record text: it is sent once per script call, not once per key.
    const template = newRecord('', {}, options, now);
    const px = pxFor(template, now);
    const plain = entries.every((e) => e.eventTime === undefined && e.fingerprint === undefined);
    const texts = plain ? undefined : entries.map((e) => encodeRecord(newRecord(e.key, e, options, now)));
    const shared = encodeRecord(template);
    const keys = entries.map((e) => this.#prefix + e.key);
    const replies = await this.#perKey<string | null>(
      keys,
      (target, from, to) =>
        target.idemClaim(to - from, keys.slice(from, to), now, px, texts ? texts.slice(from, to) : shared),
      (client, i) => client.idemClaimOne(keys[i] as string, now, px, texts ? (texts[i] as string) : shared),
    );
    return replies.map((old, i): AddResult => {
      const entry = entries[i] as KeyedEntry;
      if (old != null) return { added: false, existing: decodeRecord(entry.key, old) };
      return {
        added: true,
        record: plain ? { ...template, id: entry.key } : newRecord(entry.key, entry, options, now),
      };
    });
  }

  protected async doGetMany(
    keys: readonly string[],
    now: number,
  ): Promise<(IdempotencyRecord | undefined)[]> {
    const full = keys.map((k) => this.#prefix + k);
    const texts = this.#isCluster
      ? await Promise.all(full.map((k) => this.#client.get(k)))
      : await this.#client.mget(full);
    return texts.map((text, i) => {
      if (text == null) return undefined;
      const record = decodeRecord(keys[i] as string, text);
      return isLive(record, now) ? record : undefined;
    });
  }

  protected async doConfirmMany(
    claims: readonly KeyedClaim[],
    ttlMs: number,
    now: number,
  ): Promise<boolean[]> {
    const expiresAt = now + ttlMs;
    const px = Math.max(1, Math.ceil(ttlMs));
    const keys = claims.map((c) => this.#prefix + c.key);
    const owners = claims.map((c) => c.owner);
    const replies = await this.#perKey<number>(
      keys,
      (target, from, to) =>
        target.idemConfirm(to - from, keys.slice(from, to), expiresAt, px, owners.slice(from, to)),
      (client, i) => client.idemConfirmOne(keys[i] as string, expiresAt, px, owners[i] as string),
    );
    return replies.map((r) => r === 1);
  }

  protected async doRemove(key: string, owner: string | undefined, _now: number): Promise<boolean> {
    const full = this.#prefix + key;
    if (owner === undefined) return (await this.#client.del(full)) > 0;
    return (await this.#client.idemRelease(full, owner)) === 1;
  }

  protected async doClear(): Promise<void> {
    // A client-level keyPrefix (ioredis option) is added to every key argument but not to SCAN's pattern or
    // results, so it is added to the pattern and stripped from the keys found.
    const clientPrefix = Buffer.from(this.#client.options.keyPrefix ?? '');
    const pattern = `${globEscape(clientPrefix.toString() + this.#prefix)}*`;
    if (this.#isCluster) {
      const masters = (this.#client as Cluster).nodes('master');
      // Keys on one node span many slots, and a multi-key UNLINK must stay in one slot: unlink per key.
      await Promise.all(
        masters.map((node) =>
          scanAll(node, pattern, async (found) => {
            const pipe = node.pipeline();
            for (const key of found) pipe.unlink(key.subarray(clientPrefix.length));
            pipelineResults(await pipe.exec());
          }),
        ),
      );
    } else {
      await scanAll(this.#client as Redis, pattern, async (found) => {
        await this.#client.unlink(...found.map((k) => k.subarray(clientPrefix.length)));
      });
    }
  }

  protected async doClose(): Promise<void> {
    if (this.#ownsClient) await closeClient(this.#client);
  }

  /**
   * Runs a claim or confirm script over `keys`, returning the per-key replies in order.
   * - One key: one single-key call (`one`), the per-message path.
   * - Standalone, up to KEYS_PER_SCRIPT keys: one multi-key call (`many`).
   * - Standalone, more: one `many` call per chunk, all in one pipeline (still one round trip), so no single
   *   script blocks the server for long.
   * - Cluster: one single-key call per key (`one`), since a script may not span slots; ioredis'
   *   auto-pipelining sends them as one pipeline per node.
   */
  async #perKey<R>(
    keys: readonly string[],
    many: <T extends ScriptCommands<unknown>>(target: T, from: number, to: number) => unknown,
    one: (client: ScriptedClient, index: number) => Promise<unknown>,
  ): Promise<R[]> {
    const client = this.#client;
    if (keys.length === 1) return (await one(client, 0)) as R[];
    if (client.isCluster) {
      const replies = (await Promise.all(keys.map((_, i) => one(client, i)))) as R[][];
      return replies.map((r) => r[0] as R);
    }
    if (keys.length <= KEYS_PER_SCRIPT) return (await many(client, 0, keys.length)) as R[];
    const pipe = client.pipeline() as ScriptedPipeline;
    for (let from = 0; from < keys.length; from += KEYS_PER_SCRIPT) {
      many(pipe, from, Math.min(keys.length, from + KEYS_PER_SCRIPT));
    }
    return (pipelineResults(await pipe.exec()) as R[][]).flat();
  }
}

/** SCANs one node for keys matching the pattern, handing each page to `onPage`. */
async function scanAll(
  node: Redis,
  pattern: string,
  onPage: (keys: Buffer[]) => Promise<void>,
): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await node.scanBuffer(cursor, 'MATCH', pattern, 'COUNT', CLEAR_CHUNK);
    cursor = next.toString();
    if (keys.length > 0) await onPage(keys);
  } while (cursor !== '0');
}
