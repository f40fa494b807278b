import { Kafka, type LogEntry, logLevel, type SASLOptions } from 'kafkajs';
import type { Logger } from 'pino';
import type { NodeConfig } from './options.js';

/**
 * The node's kafkajs client. Its retry budget rides out a broker away for a minute or two (a restart, a leader
 * election) instead of failing the batch: 20 tries, backing off to 10 s. kafkajs logs go to the node's logger.
 */
export function kafkaClient(config: NodeConfig['kafka'], logger: Logger): Kafka {
  // allowPlaintext is ours (checked by the config schema), not a kafkajs setting.
  const { allowPlaintext: _allowPlaintext, ...sasl } = config.sasl ?? { allowPlaintext: false };
  return new Kafka({
    clientId: config.clientId,
    brokers: config.brokers,
    ssl: config.ssl,
    ...(config.sasl ? { sasl: sasl as SASLOptions } : {}),
    connectionTimeout: config.connectionTimeout,
    requestTimeout: config.requestTimeout,
    logLevel: logLevel.WARN,
    logCreator: () => (entry) => logKafkajs(logger, entry),
    retry: { retries: 20, initialRetryTime: 300, maxRetryTime: 10_000 },
  });
}

/**
 * kafkajs warns at every start that a bounded retry budget "may invalidate EoS guarantees": a send that used
 * it up and is sent again can be written twice. The node is at-least-once by design and counts that case in.
 */
const EXPECTED = 'Limiting retries for the idempotent producer may invalidate EoS guarantees';

function logKafkajs(logger: Logger, { namespace, level, log }: LogEntry): void {
  const { message, timestamp: _timestamp, logger: _name, ...fields } = log;
  if (message === EXPECTED) return;
  const line = { kafkajs: namespace, ...fields };
  if (level === logLevel.ERROR) logger.error(line, message);
  else if (level === logLevel.WARN) logger.warn(line, message);
  else if (level === logLevel.INFO) logger.info(line, message);
  else logger.debug(line, message);
}
