import { z } from 'zod';
import { refuseBadPercentEscapes, timerMs } from '../../options/limits.js';
import { tlsSettingSchema } from '../../options/tls.js';
import { storeOptionsParser } from '../shared.js';

export const redisDefaults = {
  /** Namespace of every key this repository writes; `clear()` deletes only keys under it. */
  keyPrefix: 'idem:',
  connectTimeoutMs: 5_000,
  /** A command without a reply by then rejects, so a hung server cannot stall the consumer. */
  commandTimeoutMs: 5_000,
  /**
   * Reconnects an in-flight command survives before it rejects. 0: never resend, because a resent claim whose
   * first copy did run would come back as a duplicate of itself; the caller sees a retryable error instead.
   */
  maxRetriesPerRequest: 0,
} as const;

const port = z.number().int().min(1).max(65_535);

/** A cluster seed node: `"host:port"` or `{ host, port }`. */
const clusterNode = z.union(
  [
    z.string().regex(/^[^\s:]+:\d{1,5}$|^\[[0-9a-fA-F:.]+\]:\d{1,5}$/, 'must be "host:port"'),
    z.object({ host: z.string().min(1), port }).strict(),
  ],
  { error: 'must be "host:port" or a table { host, port }' },
);

/** Config schema for `repository.type = "redis"`: exactly one of `url`, `host` or `cluster` says where. */
export const redisOptionsSchema = z
  .object({
    /** `redis://[user:pass@]host:port[/db]`, or `rediss://` for TLS. */
    url: z
      .url({ protocol: /^rediss?$/, error: 'must be a redis:// or rediss:// URL' })
      .superRefine(refuseBadPercentEscapes)
      .optional(),
    host: z.string().min(1).optional(),
    port: port.optional(),
    /** Seed nodes of a Redis Cluster; the repository then uses ioredis `Cluster`. */
    cluster: z.array(clusterNode).min(1).optional(),
    // An empty prefix would make clear() delete the whole database. On a Cluster, a `{hash tag}` in the prefix
    // would pin every key to one slot, hence one node.
    keyPrefix: z.string().min(1).default(redisDefaults.keyPrefix),
    tls: tlsSettingSchema.optional(),
    username: z.string().min(1).optional(),
    password: z.string().optional(),
    connectTimeoutMs: timerMs().default(redisDefaults.connectTimeoutMs),
    commandTimeoutMs: timerMs().default(redisDefaults.commandTimeoutMs),
    maxRetriesPerRequest: z.number().int().min(0).default(redisDefaults.maxRetriesPerRequest),
  })
  .strict()
  .superRefine((options, ctx) => {
    const where = [options.url, options.host, options.cluster].filter((v) => v !== undefined).length;
    if (where === 0) {
      ctx.addIssue({ code: 'custom', path: ['url'], message: 'is required: set url, host or cluster' });
    } else if (where > 1) {
      const path = options.cluster !== undefined ? 'cluster' : 'host';
      ctx.addIssue({ code: 'custom', path: [path], message: 'set only one of url, host or cluster' });
    }
    if (options.port !== undefined && options.host === undefined) {
      ctx.addIssue({ code: 'custom', path: ['port'], message: 'needs host' });
    }
  });

export type RedisOptions = z.output<typeof redisOptionsSchema>;

/** Options of {@link RedisRepository.open}: the config table plus an injectable clock. */
export type RedisRepositoryOptions = z.input<typeof redisOptionsSchema> & { clock?: () => number };

export const parseRedisOptions = storeOptionsParser(redisOptionsSchema, 'RedisRepository.open(...)');
