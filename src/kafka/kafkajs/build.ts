import { Kafka, type LogEntry, logLevel, type SASLOptions } from 'kafkajs';
import type {
  KafkaClientBehaviour,
  KafkaClientSettings,
  KafkaLogEntry,
  KafkaLogSink,
} from '../port/index.js';
import { RETRY_TIME_MS } from './retry.js';

/**
 * The one kafkajs client builder: the dedup node (a budget of 20 tries that rides out a broker away for a minute
 * or two, logs to the node's logger) and the `kafka` repository (8 tries, quiet) both build theirs here.
 */
export function buildKafkajs(settings: KafkaClientSettings, behaviour: KafkaClientBehaviour): Kafka {
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
            if (onLog === undefined || onLog(portEntry(entry))) logKafkajs(logger, entry);
          },
        }
      : { logLevel: logLevel.NOTHING }),
    retry: {
      retries: behaviour.retries,
      initialRetryTime: RETRY_TIME_MS.initial,
      maxRetryTime: RETRY_TIME_MS.max,
    },
  });
}

/**
 * kafkajs warns at every start that a bounded retry budget "may invalidate EoS guarantees": a send that used
 * it up and is sent again can be written twice. The node is at-least-once by design and counts that case in.
 */
const EXPECTED = 'Limiting retries for the idempotent producer may invalidate EoS guarantees';

/** kafkajs namespaces whose errors mean "the broker did not answer", one entry per attempt. */
const CONNECTING = new Set(['Connection', 'BrokerPool']);

const LEVELS: Record<number, KafkaLogEntry['level']> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
};

/** A kafkajs log entry as the port describes it. */
function portEntry({ namespace, level, log }: LogEntry): KafkaLogEntry {
  const { message, timestamp: _timestamp, logger: _name, ...fields } = log;
  const entry = {
    level: LEVELS[level] ?? 'debug',
    namespace,
    message,
    fields: { kafkajs: namespace, ...fields },
  };
  if (!CONNECTING.has(namespace)) return entry;
  const connectionFailure = message.replace(
    /^Failed to connect to seed broker, trying another broker from the list: /,
    '',
  );
  return { ...entry, connectionFailure };
}

function logKafkajs(logger: KafkaLogSink, { namespace, level, log }: LogEntry): void {
  const { message, timestamp: _timestamp, logger: _name, ...fields } = log;
  if (message === EXPECTED) return;
  const line = { kafkajs: namespace, ...fields };
  if (level === logLevel.ERROR) logger.error(line, message);
  else if (level === logLevel.WARN) logger.warn(line, message);
  else if (level === logLevel.INFO) logger.info(line, message);
  else logger.debug(line, message);
}
