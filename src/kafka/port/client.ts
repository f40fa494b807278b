import type { TlsOptions } from '../../options/tls.js';
import type { KafkaSasl } from '../connection.js';
import type { KafkaAdmin } from './admin.js';
import type { GroupConsumer, GroupConsumerOptions } from './consumer.js';
import type { KafkaErrorClassifier } from './errors.js';
import type { KafkaClientName } from './names.js';
import type { PartitionReader } from './partition-reader.js';
import type { KafkaProducer, ProducerOptions } from './producer.js';

/** Where a client's log goes: the part of a pino logger it uses (pino is the node's dependency, not the library's). */
export interface KafkaLogSink {
  error(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
  debug(fields: object, message: string): void;
}

/** One entry of a client's own log, as {@link KafkaClientBehaviour.onLog} sees it. */
export interface KafkaLogEntry {
  readonly level: 'error' | 'warn' | 'info' | 'debug';
  /** The client's component (kafkajs: its namespace, e.g. `Connection`). */
  readonly namespace: string;
  readonly message: string;
  /** The fields to log with the message (kafkajs: `{ kafkajs: namespace, ... }`). */
  readonly fields: Readonly<Record<string, unknown>>;
  /** Set on a failed attempt to reach a broker: what failed, unwrapped (the node's start reports these once). */
  readonly connectionFailure?: string;
}

/** How to reach the cluster (a parsed connection table). */
export interface KafkaClientSettings {
  readonly brokers: string[];
  readonly clientId: string;
  readonly ssl: boolean | TlsOptions;
  readonly sasl?: KafkaSasl | undefined;
  readonly connectionTimeout: number;
  readonly requestTimeout: number;
}

export interface KafkaClientBehaviour {
  /** Retry budget per request (backing off by {@link retryBackoffMs}). */
  readonly retries: number;
  /** Where the client's warnings and errors go; without one it is quiet (failures surface as rejections). */
  readonly logger?: KafkaLogSink;
  /** Sees each log entry first; `false` drops it (the node's start reports connection retries once). */
  readonly onLog?: (entry: KafkaLogEntry) => boolean;
}

/** Both clients' retry backoff: from 300 ms, doubling, at most 10 s. */
export const RETRY_BACKOFF_MS = { initial: 300, max: 10_000 } as const;

/** The wait before retry `attempt` (0 first) by {@link RETRY_BACKOFF_MS}. */
export function retryBackoffMs(attempt: number): number {
  return Math.min(RETRY_BACKOFF_MS.max, RETRY_BACKOFF_MS.initial * 2 ** attempt);
}

/** Hands a client's log entry to `onLog`, then (unless it said false) to the logger. */
export function logThrough(behaviour: KafkaClientBehaviour, entry: KafkaLogEntry): void {
  if (behaviour.onLog?.(entry) === false) return;
  behaviour.logger?.[entry.level]({ ...entry.fields }, entry.message);
}

/** What a client can do beyond the common port. */
export interface KafkaClientCapabilities {
  /**
   * A transaction's offsets carry the group's generation and member id (KIP-447): the group fences a zombie, so
   * one producer per instance is safe. Else (kafkajs) only a transactional id per input partition fences it.
   */
  readonly fencesByGroup: boolean;
}

/** A client: each part it makes holds connections its owner closes; `close` ends what the client holds. */
export interface KafkaClient {
  readonly name: KafkaClientName;
  readonly capabilities: KafkaClientCapabilities;
  readonly errors: KafkaErrorClassifier;
  consumer(options: GroupConsumerOptions): GroupConsumer;
  producer(options?: ProducerOptions): KafkaProducer;
  admin(): KafkaAdmin;
  partitionReader(): PartitionReader;
  close(): Promise<void>;
}

/** What an implementation module (kafkajs/index.ts, platformatic/index.ts) exports as `createClient`. */
export type KafkaClientFactory = (
  settings: KafkaClientSettings,
  behaviour: KafkaClientBehaviour,
) => KafkaClient | Promise<KafkaClient>;
