import { z } from 'zod';
import { timerMs } from '../../options/limits.js';
import { tlsSettingSchema } from '../../options/tls.js';
import { clockSkewDefaults, clockSkewFields } from '../clock-skew.js';
import { storeOptionsParser } from '../shared.js';

/** Keyspace and table names: letters, digits and `_`, starting with a letter, at most 48 characters (Cassandra's own limit). */
export const IDENTIFIER_PATTERN = /^[a-zA-Z][a-zA-Z0-9_]{0,47}$/;

/** Consistency levels accepted for plain reads and for writes (an LWT's commit phase uses the write level). */
const consistencyLevels = [
  'ANY',
  'ONE',
  'TWO',
  'THREE',
  'QUORUM',
  'ALL',
  'LOCAL_QUORUM',
  'EACH_QUORUM',
  'LOCAL_ONE',
] as const;

export const cassandraDefaults = {
  localDataCenter: 'datacenter1',
  keyspace: 'idempotency',
  table: 'processed_ids',
  /** Partition-key component that keeps several repositories (and test namespaces) apart in one table. */
  namespace: 'default',
  /** Off by default: production schemas belong to migrations, not to an application's first start. */
  createSchema: false,
  /** Used only by `createSchema`: one replica, right for a single test node, wrong for production. */
  replication: { class: 'SimpleStrategy', replication_factor: 1 },
  consistency: { read: 'LOCAL_QUORUM', write: 'LOCAL_QUORUM' },
  serialConsistency: 'LOCAL_SERIAL',
  /** Statements in flight at once for one batch call; LWTs cannot be batched across partitions. */
  batchConcurrency: 128,
  /** Client-side timeout per request; above the server's own 2–5 s timeouts so those surface first. */
  requestTimeoutMs: 12_000,
  connectTimeoutMs: 5_000,
  ...clockSkewDefaults,
} as const satisfies Record<string, unknown>;

const identifier = () =>
  z
    .string()
    .regex(IDENTIFIER_PATTERN, 'must be 1-48 letters, digits or "_", starting with a letter (a CQL name)');

const consistency = z.enum(consistencyLevels);

/** A replication map such as `{ class = "NetworkTopologyStrategy", dc1 = 3 }`; values end up in DDL, so they are restricted. */
const replicationSchema = z
  .record(
    z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'keys must be strategy options or datacenter names'),
    z.union(
      [
        z.number().int().min(0),
        z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, 'replication values are class names or counts'),
      ],
      { error: 'must be a replica count or a class name' },
    ),
  )
  .refine((map) => typeof map.class === 'string', 'needs a "class"');

/** Config schema for `repository.type = "cassandra"`. */
export const cassandraOptionsSchema = z
  .object({
    /** `host` or `host:port`; optional only when an existing client is passed to `CassandraRepository.open`. */
    contactPoints: z.array(z.string().min(1)).min(1).optional(),
    localDataCenter: z.string().min(1).default(cassandraDefaults.localDataCenter),
    keyspace: identifier().default(cassandraDefaults.keyspace),
    table: identifier().default(cassandraDefaults.table),
    namespace: z.string().min(1).max(256).default(cassandraDefaults.namespace),
    createSchema: z.boolean().default(cassandraDefaults.createSchema),
    replication: replicationSchema.default(() => ({ ...cassandraDefaults.replication })),
    consistency: z
      .object({
        read: consistency.exclude(['ANY']).default(cassandraDefaults.consistency.read),
        write: consistency.default(cassandraDefaults.consistency.write),
      })
      .strict()
      .prefault({}),
    serialConsistency: z.enum(['SERIAL', 'LOCAL_SERIAL']).default(cassandraDefaults.serialConsistency),
    username: z.string().min(1).optional(),
    password: z.string().optional(),
    /** TLS to the native port: `true` (system CAs) or `{ ca, cert, key, servername, rejectUnauthorized }`; certificates are verified. */
    tls: tlsSettingSchema.optional(),
    batchConcurrency: z.number().int().min(1).max(2048).default(cassandraDefaults.batchConcurrency),
    requestTimeoutMs: timerMs().default(cassandraDefaults.requestTimeoutMs),
    connectTimeoutMs: timerMs().default(cassandraDefaults.connectTimeoutMs),
    ...clockSkewFields,
  })
  .strict()
  .refine((o) => (o.username === undefined) === (o.password === undefined), {
    message: 'username and password go together',
    path: ['password'],
  });

export type CassandraOptions = z.output<typeof cassandraOptionsSchema>;

export type CassandraRepositoryOptions = z.input<typeof cassandraOptionsSchema>;

export const parseCassandraOptions = storeOptionsParser(
  cassandraOptionsSchema,
  'CassandraRepository.open(...)',
);
