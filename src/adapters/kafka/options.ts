import { z } from 'zod';
import type { IdempotentConsumer } from '../../consumer/idempotent-consumer.js';
import type { MessageHandler } from '../../consumer/types.js';
import { kafkaConnectionFields, saslNeedsTls } from '../../kafka/connection.js';
import { type IdSource, idSourceSchema } from '../../kafka/index.js';
import { type ConsumedMessage, defaultKafkaClient, kafkaClientNames } from '../../kafka/port/index.js';
import { type OptionsOrigin, optionError, parseOptions } from '../../options/issues.js';
import { durationMs } from '../../util/duration.js';
import type {
  AdapterConsumerConfig,
  KafkajsConsumer,
  KafkajsKafka,
  KafkajsProducer,
} from './kafkajs-shapes.js';
import type { BlockInfo, DeadLetterEvent, KafkaRecord } from './types.js';
import { kafkaRecordId } from './types.js';

/** Defaults of the Kafka adapter, written once; the config schema and the code path both read them here. */
export const kafkaAdapterDefaults = {
  /** The record key is the message id, as in KIP-655's `deduplicateByKey`. */
  id: { from: 'key' } as IdSource,
  fromBeginning: false,
  /** Most records per `processBatch` call: one store round trip per sub-batch, a heartbeat and a commit after it. */
  batchSize: 500,
  /** Longest fetch long-poll of a consumer the adapter creates: it also bounds how late a retry starts. */
  maxWaitTimeInMs: 1_000,
  /** Partitions handled at once; one partition's records are always handled in order. */
  partitionsConsumedConcurrently: 1,
  retry: {
    initialMs: 200,
    maxMs: 30_000,
    multiplier: 2,
    jitter: 0.2,
    /** Handler attempts before a record goes to the DLQ (without a DLQ, it is retried at `maxMs` forever). */
    maxAttempts: 5,
  },
  /** The client id of a client the adapter builds from connection settings. */
  clientId: 'idem-consumer',
  /** Retries per request of a client the adapter builds from connection settings (kafkajs's own default). */
  clientRetries: 5,
} as const;

const { retry: retryDefaults } = kafkaAdapterDefaults;

/** Backoff and give-up settings of a failing record. */
export const retrySchema = z
  .object({
    initialMs: durationMs.default(retryDefaults.initialMs),
    maxMs: durationMs.default(retryDefaults.maxMs),
    multiplier: z.number().min(1).default(retryDefaults.multiplier),
    jitter: z.number().min(0).max(1).default(retryDefaults.jitter),
    maxAttempts: z.number().int().min(1).default(retryDefaults.maxAttempts),
  })
  .strict()
  .refine((retry) => retry.maxMs >= retry.initialMs, {
    path: ['maxMs'],
    message: 'must be at least initialMs',
  });

/**
 * The plain-data settings of the adapter (a `[kafka]` config table takes this shape). Clients, the handler and
 * the IdempotentConsumer exist only in code: see {@link RunIdempotentConsumerOptions}.
 */
export const kafkaAdapterConfigSchema = z
  .object({
    topics: z.array(z.string().min(1)).min(1),
    /** The client library for connection settings (default `platformatic`); kafkajs objects run on kafkajs. */
    client: z.enum(kafkaClientNames).optional(),
    /** Required when the adapter creates the consumer from `kafka`. */
    groupId: z.string().min(1).optional(),
    fromBeginning: z.boolean().default(kafkaAdapterDefaults.fromBeginning),
    id: idSourceSchema.default(kafkaAdapterDefaults.id),
    batchSize: z.number().int().min(1).default(kafkaAdapterDefaults.batchSize),
    partitionsConsumedConcurrently: z
      .number()
      .int()
      .min(1)
      .default(kafkaAdapterDefaults.partitionsConsumedConcurrently),
    retry: retrySchema.prefault({}),
    dlq: z
      .object({ topic: z.string().min(1) })
      .strict()
      .optional(),
  })
  .strict();

/** Parsed {@link kafkaAdapterConfigSchema}. */
export type KafkaAdapterConfig = z.output<typeof kafkaAdapterConfigSchema>;

// `client` is the adapter's own option, beside `kafka`.
const { client: _client, ...connectionFields } = kafkaConnectionFields;

/** Connection settings for a client the adapter builds itself: the keys of the node's `[kafka]` table. */
export const kafkaAdapterConnectionSchema = z
  .object({ ...connectionFields, clientId: z.string().min(1).default(kafkaAdapterDefaults.clientId) })
  .strict()
  .superRefine(saslNeedsTls('kafka', 'record'));

/** Connection settings the adapter builds its own client from (see {@link kafkaAdapterConnectionSchema}). */
export type KafkaAdapterConnection = z.input<typeof kafkaAdapterConnectionSchema>;

/** Options of {@link runIdempotentConsumer}. Give `kafka` (the adapter makes and owns the clients) or `consumer`. */
export interface RunIdempotentConsumerOptions<R = unknown>
  extends Omit<z.input<typeof kafkaAdapterConfigSchema>, 'dlq'> {
  /**
   * Connection settings (the adapter builds a client of library `client` and closes it), or a kafkajs `Kafka`: the
   * adapter creates the consumer and the DLQ producer from it, and disconnects them on `stop()`.
   */
  readonly kafka?: KafkaAdapterConnection | KafkajsKafka;
  /** Extra settings of the consumer made from `kafka`: a kafkajs `ConsumerConfig`'s keys, passed to any client. */
  readonly consumerConfig?: AdapterConsumerConfig;
  /** Your own kafkajs consumer (not yet running): `stop()` stops it but leaves it connected. */
  readonly consumer?: KafkajsConsumer;
  /** Must take the id the adapter put on the record (`id: kafkaRecordId`); the adapter's `id` says where it is. */
  readonly idempotent: IdempotentConsumer<KafkaRecord>;
  /** Your per-record handler; throwing makes the record retry, then go to the DLQ. */
  readonly handler: MessageHandler<KafkaRecord, R>;
  /** Dead-letter topic; `producer` defaults to one made from `kafka` (a given producer is connected, not owned). */
  readonly dlq?: { readonly topic: string; readonly producer?: KafkajsProducer };
  /** Called each time a partition stops at a record (default: a warning on the consumer's logger). */
  readonly onError?: (error: unknown, info: BlockInfo) => void;
  /** Called after a record's dead letter is acknowledged, before its offset is committed. */
  readonly onDeadLetter?: (event: DeadLetterEvent) => void;
}

/** Options after validation, with every default applied. */
export interface ResolvedKafkaAdapterOptions<R>
  extends KafkaAdapterConfig,
    Pick<RunIdempotentConsumerOptions<R>, 'idempotent' | 'handler' | 'onError' | 'onDeadLetter'> {
  /** A kafkajs client given as `kafka`. */
  readonly kafka: KafkajsKafka | undefined;
  /** Connection settings given as `kafka`, parsed. */
  readonly connection: z.output<typeof kafkaAdapterConnectionSchema> | undefined;
  readonly consumerConfig: AdapterConsumerConfig;
  readonly consumer: KafkajsConsumer | undefined;
  readonly dlqProducer: KafkajsProducer | undefined;
}

const ORIGIN: OptionsOrigin = { kind: 'code', owner: 'runIdempotentConsumer(...)' };

/** Validates the options; each problem is a ConfigError naming the option. */
export function resolveKafkaAdapterOptions<R>(
  options: RunIdempotentConsumerOptions<R>,
): ResolvedKafkaAdapterOptions<R> {
  const { kafka, consumerConfig, consumer, idempotent, handler, dlq, onError, onDeadLetter, ...plain } =
    options;
  const config = parseOptions(
    kafkaAdapterConfigSchema,
    { ...plain, ...(dlq ? { dlq: { topic: dlq.topic } } : {}) },
    ORIGIN,
  );
  if ((kafka === undefined) === (consumer === undefined)) {
    throw optionError(
      ['kafka'],
      'give exactly one of kafka (the adapter makes the consumer) or consumer',
      ORIGIN,
    );
  }
  if (kafka && config.groupId === undefined) {
    throw optionError(['groupId'], 'is required when the adapter creates the consumer from kafka', ORIGIN);
  }
  // A kafkajs `Kafka` instance makes consumers; connection settings do not.
  const kafkajs =
    kafka === undefined || typeof (kafka as Partial<KafkajsKafka>).consumer === 'function'
      ? (kafka as KafkajsKafka | undefined)
      : undefined;
  const connection =
    kafka === undefined || kafkajs !== undefined
      ? undefined
      : parseOptions(kafkaAdapterConnectionSchema, kafka, { ...ORIGIN, prefix: ['kafka'] });
  if (kafkajs !== undefined && config.client !== undefined && config.client !== 'kafkajs') {
    throw optionError(
      ['client'],
      `is ${JSON.stringify(config.client)}, but kafka is a kafkajs client: give kafka as connection settings ` +
        '({ brokers: [...] }) for another client',
      ORIGIN,
    );
  }
  if (dlq && !dlq.producer && !kafka) {
    throw optionError(['dlq', 'producer'], 'is required when the consumer is given instead of kafka', ORIGIN);
  }
  if (typeof handler !== 'function') throw optionError(['handler'], 'must be a function', ORIGIN);
  checkConsumer(idempotent);
  return {
    ...config,
    // The client the adapter runs on: kafkajs for kafkajs objects, else the one chosen or the package default.
    client:
      kafkajs !== undefined || consumer !== undefined ? 'kafkajs' : (config.client ?? defaultKafkaClient),
    kafka: kafkajs,
    connection,
    consumerConfig: consumerConfig ?? {},
    consumer,
    idempotent,
    handler,
    dlqProducer: dlq?.producer,
    onError,
    onDeadLetter,
  };
}

/** A record whose only trace of `PROBE_ID` is its `id` field: a selector that returns it reads `record.id`. */
const PROBE_ID = 'idem-adapter-probe-id';
const PROBE: KafkaRecord = {
  topic: 'idem-probe',
  partition: 0,
  timestamp: 0,
  id: PROBE_ID,
  message: {
    key: null,
    value: null,
    headers: {},
    timestamp: '0',
    offset: '0',
    attributes: 0,
  } as ConsumedMessage,
};

/**
 * True when the consumer's id selector takes the id the adapter read: `kafkaRecordId`, `'id'`, or a function that
 * returns `record.id` on a probe record. Reading it elsewhere would bypass the adapter's handling of bad ids.
 */
function readsRecordId(id: unknown): boolean {
  if (id === kafkaRecordId || id === 'id') return true;
  if (typeof id !== 'function') return false;
  try {
    return (id as (record: KafkaRecord) => unknown)(PROBE) === PROBE_ID;
  } catch {
    return false;
  }
}

/** The wrapped consumer must read the adapter's id and give failed records back for retry. */
function checkConsumer(idempotent: IdempotentConsumer<KafkaRecord> | undefined): void {
  if (!idempotent || typeof idempotent.processBatch !== 'function') {
    throw optionError(['idempotent'], 'must be an IdempotentConsumer<KafkaRecord>', ORIGIN);
  }
  const { id, removeOnFailure, eventTime } = idempotent.options;
  if (!readsRecordId(id)) {
    throw optionError(
      ['idempotent', 'id'],
      'must take the id the adapter read: build the IdempotentConsumer with `id: kafkaRecordId` or ' +
        "`id: (record) => record.id`; say where ids come from in the adapter's own `id` option: " +
        "{ from: 'key' } (the default), { from: 'value', path: 'meta.orderId' } or { from: 'header', name: 'event-id' }",
      ORIGIN,
    );
  }
  // Kept claims would make every retry of a failed record an in-progress wait until the lease lapses.
  if (!removeOnFailure && !eventTime) {
    throw optionError(
      ['idempotent', 'removeOnFailure'],
      'must be true: the Kafka adapter retries failed records itself and then dead-letters them',
      ORIGIN,
    );
  }
}
