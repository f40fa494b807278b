import { Kafka, type LogEntry, logLevel, type SASLOptions } from 'kafkajs';
import type { TlsOptions } from '../options/tls.js';
import type { KafkaSasl } from './connection.js';

/**
 * Where kafkajs's log goes: the part of a pino logger the client uses (the node passes its pino logger; pino is
 * the node's optional dependency, not the library's).
 */
export interface KafkaLogSink {
  error(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  info(fields: object, message: string): void;
  debug(fields: object, message: string): void;
}

/** What {@link createKafkaClient} needs of a parsed connection table. */
export interface KafkaClientSettings {
  readonly brokers: string[];
  readonly clientId: string;
  readonly ssl: boolean | TlsOptions;
  readonly sasl?: KafkaSasl | undefined;
  readonly connectionTimeout: number;
  readonly requestTimeout: number;
}

/** How a client built by {@link createKafkaClient} retries and logs. */
export interface KafkaClientBehaviour {
  /** kafkajs's retry budget per request (backing off from 300 ms to 10 s). */
  readonly retries: number;
  /** Where kafkajs's warnings and errors go; without one the client is quiet (failures surface as rejections). */
  readonly logger?: KafkaLogSink;
  /** Sees each kafkajs log entry first; `false` drops it (the node's start reports connection retries once). */
  readonly onLog?: (entry: LogEntry) => boolean;
}

/**
 * The one kafkajs client builder: the dedup node (a budget of 20 tries that rides out a broker away for a minute
 * or two, logs to the node's logger) and the `kafka` repository (8 tries, quiet) both build theirs here.
 */
export function createKafkaClient(settings: KafkaClientSettings, behaviour: KafkaClientBehaviour): Kafka {
  // allowPlaintext is ours (checked by the config schema), not a kafkajs setting.
  const { allowPlaintext: _allowPlaintext, ...sasl } = settings.sasl ?? { allowPlaintext: false };
  const { logger, onLog } = behaviour;
  return new Kafka({
    clientId: settings.clientId,
    brokers: settings.brokers,
    ssl: settings.ssl,
    ...(settings.sasl ? { sasl: sasl as SASLOptions } : {}),
    connectionTimeout: settings.connectionTimeout,
    requestTimeout: settings.requestTimeout,
    ...(logger
      ? {
          logLevel: logLevel.WARN,
          logCreator: () => (entry: LogEntry) => {
            if (onLog === undefined || onLog(entry)) logKafkajs(logger, entry);
          },
        }
      : { logLevel: logLevel.NOTHING }),
    retry: { retries: behaviour.retries, initialRetryTime: 300, maxRetryTime: 10_000 },
  });
}

/**
 * kafkajs warns at every start that a bounded retry budget "may invalidate EoS guarantees": a send that used
 * it up and is sent again can be written twice. The node is at-least-once by design and counts that case in.
 */
const EXPECTED = 'Limiting retries for the idempotent producer may invalidate EoS guarantees';

function logKafkajs(logger: KafkaLogSink, { namespace, level, log }: LogEntry): void {
  const { message, timestamp: _timestamp, logger: _name, ...fields } = log;
  if (message === EXPECTED) return;
  const line = { kafkajs: namespace, ...fields };
  if (level === logLevel.ERROR) logger.error(line, message);
  else if (level === logLevel.WARN) logger.warn(line, message);
  else if (level === logLevel.INFO) logger.info(line, message);
  else logger.debug(line, message);
}
