import { Cluster, type ClusterNode, type RedisOptions as IORedisOptions, Redis } from 'ioredis';
import { ConfigError, errorMessage, RepositoryError } from '../../errors.js';
import type { RedisOptions } from './options.js';

/** The config key that says where the server is, and where, without credentials. */
function addressOf(options: RedisOptions): [key: string, address: string] {
  const { cluster, host, port = 6379 } = options;
  const seeds = cluster?.map((n) => (typeof n === 'string' ? n : `${n.host}:${n.port}`));
  if (seeds !== undefined) return ['repository.cluster', seeds.join(',')];
  if (host !== undefined) return ['repository.host', `${host}:${port}`];
  const url = new URL(options.url as string);
  const path = url.pathname.length > 1 ? url.pathname : '';
  return ['repository.url', `${url.protocol}//${url.hostname}:${url.port || 6379}${path}`];
}

/** ioredis settings of every node. No offline queue: while disconnected a command rejects at once, retryable. */
function nodeOptions(options: RedisOptions): IORedisOptions {
  const tlsFromUrl = options.url?.startsWith('rediss:') ? {} : undefined;
  const tls = options.tls === true ? {} : options.tls === false ? undefined : (options.tls ?? tlsFromUrl);
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    connectTimeout: options.connectTimeoutMs,
    commandTimeout: options.commandTimeoutMs,
    maxRetriesPerRequest: options.maxRetriesPerRequest,
    // A reply lost with the connection is an unknown outcome: the caller decides, not a silent resend.
    autoResendUnfulfilledCommands: false,
    ...(options.username !== undefined ? { username: options.username } : {}),
    ...(options.password !== undefined ? { password: options.password } : {}),
    ...(tls !== undefined ? { tls } : {}),
  };
}

const CLUSTER_DISCONNECT_MS = 50;

export function createClient(options: RedisOptions): Redis | Cluster {
  const node = nodeOptions(options);
  if (options.cluster !== undefined) {
    const seeds: ClusterNode[] = options.cluster.map((n) => {
      if (typeof n !== 'string') return n;
      const at = n.lastIndexOf(':');
      return { host: n.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(n.slice(at + 1)) };
    });
    return new Cluster(seeds, {
      lazyConnect: true,
      enableOfflineQueue: false,
      // Batches send one command per key; auto-pipelining groups them into one pipeline per node.
      enableAutoPipelining: true,
      // After a failed slots query ioredis waits disconnectTimeout (2 s) for a 'close' the refused seed socket
      // already emitted, keeping the process alive after a failed open. A disconnect loses pending replies anyway.
      redisOptions: { ...node, disconnectTimeout: CLUSTER_DISCONNECT_MS },
    });
  }
  // No reconnect before the first connect succeeded: a refused first connect ends the client instead of leaving
  // it 'reconnecting', whose disconnect() waits 2 s for a closed socket. Once connected, back off 50 ms per
  // attempt, at most 2 s, to ride out a server restart.
  let connected = false;
  const retryStrategy = (attempt: number): number | null =>
    connected ? Math.min(attempt * 50, 2_000) : null;
  const client =
    options.host !== undefined
      ? new Redis({ ...node, retryStrategy, host: options.host, port: options.port ?? 6379 })
      : new Redis(options.url as string, { ...node, retryStrategy });
  client.once('ready', () => {
    connected = true;
  });
  return client;
}

/** Ends a client whose connect failed, leaving no reconnect timer, socket or close timer alive. */
function release(client: Redis | Cluster): void {
  if (client.status === 'end') return; // closed already; disconnect() would start a 2 s wait for nothing
  client.disconnect();
  // A socket still open (a server that accepted but never answered) is destroyed now rather than after 2 s.
  if (client instanceof Redis) client.stream?.destroy();
}

/**
 * Connects an owned client; a failure releases it: a ConfigError when the setting is wrong (unknown host, bad
 * credentials), a retryable RepositoryError when the server may just not be up yet.
 */
export async function connectClient(client: Redis | Cluster, options: RedisOptions): Promise<void> {
  const [key, address] = addressOf(options);
  // Without a listener ioredis prints every reconnect error; the first (ECONNREFUSED...) says the most.
  let firstError: unknown;
  client.on('error', (error) => {
    firstError ??= error;
  });
  let timer: NodeJS.Timeout | undefined;
  const deadline = options.connectTimeoutMs + options.commandTimeoutMs;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${deadline} ms`)), deadline);
  });
  try {
    await Promise.race([client.connect(), timeout]);
  } catch (error) {
    release(client);
    const cause = firstError ?? error;
    const detail = errorMessage(cause);
    const code = String((cause as { code?: string }).code);
    if (/^(ENOTFOUND|EAI_AGAIN)$/.test(code) || /WRONGPASS|NOAUTH|NOPERM|invalid password/i.test(detail)) {
      const badKey = /WRONGPASS|NOAUTH|NOPERM|password/i.test(detail) ? 'repository.password' : key;
      throw new ConfigError(badKey, `cannot connect to redis at ${address}: ${detail}`, { cause });
    }
    throw new RepositoryError(`redis: cannot connect to ${address} (${key}): ${detail}`, { cause });
  } finally {
    clearTimeout(timer);
  }
}

/** Closes an owned client: a graceful QUIT when connected, else an immediate disconnect. */
export async function closeClient(client: Redis | Cluster): Promise<void> {
  if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
  else client.disconnect();
}
