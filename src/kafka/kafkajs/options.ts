import { Kafka, type LogEntry, logLevel, type SASLOptions } from 'kafkajs';
import {
  type KafkaClientBehaviour,
  type KafkaClientSettings,
  type KafkaLogEntry,
  logThrough,
  RETRY_BACKOFF_MS,
} from '../port/index.js';

/** kafkajs's own default budget, given to a client the package did not build (`fromKafkajs`). */
export const KAFKAJS_DEFAULT_RETRIES = 5;

/** The one kafkajs client builder: the node's (logs to its logger) and the `kafka` repository's (quiet). */
export function buildKafkajs(settings: KafkaClientSettings, behaviour: KafkaClientBehaviour): Kafka {
  // allowPlaintext is ours (checked by the config schema), not a kafkajs setting.
  const { allowPlaintext: _allowPlaintext, ...sasl } = settings.sasl ?? { allowPlaintext: false };
  const { logger } = behaviour;
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
            const port = portEntry(entry);
            if (port.message !== EXPECTED) logThrough(behaviour, port);
          },
        }
      : { logLevel: logLevel.NOTHING }),
    retry: {
      retries: behaviour.retries,
      initialRetryTime: RETRY_BACKOFF_MS.initial,
      maxRetryTime: RETRY_BACKOFF_MS.max,
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
