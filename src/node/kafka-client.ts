import type { Kafka, LogEntry } from 'kafkajs';
import type { Logger } from 'pino';
import { createKafkaClient } from '../kafka/client.js';
import type { KafkaConnection } from '../kafka/connection.js';
import { formatDuration } from '../util/duration.js';

/**
 * The node's kafkajs client, built by the shared builder. Its retry budget rides out a broker away for a minute
 * or two (a restart, a leader election) instead of failing the batch: 20 tries, backing off to 10 s. kafkajs
 * logs go to the node's logger; while the node starts, `startup` reports connection retries once.
 */
export function kafkaClient(config: KafkaConnection, logger: Logger, startup?: StartupWatch): Kafka {
  return createKafkaClient(config, {
    retries: 20,
    logger,
    ...(startup ? { onLog: (entry: LogEntry) => startup.sees(entry) } : {}),
  });
}

/** kafkajs namespaces whose errors mean "the broker did not answer", one entry per attempt. */
const CONNECTING = new Set(['Connection', 'BrokerPool']);

/**
 * The node's start, as seen through kafkajs's log: while it lasts, a failed connection attempt is logged once
 * (kafkajs logs every one of its 20 tries, twice), and the last one is kept for the line that gives up.
 */
export class StartupWatch {
  #starting = true;
  #told = false;
  /** The last connection error kafkajs reported during the start. */
  lastError: string | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly timeoutMs: number,
  ) {}

  /** The start is over: kafkajs's log passes through unchanged from now on. */
  started(): void {
    this.#starting = false;
  }

  /** Whether kafkajs's entry is logged as it is. */
  sees(entry: LogEntry): boolean {
    if (!this.#starting || !CONNECTING.has(entry.namespace)) return true;
    const { message, timestamp: _t, logger: _l, ...fields } = entry.log;
    this.lastError = message.replace(
      /^Failed to connect to seed broker, trying another broker from the list: /,
      '',
    );
    if (this.#told) {
      this.logger.debug({ kafkajs: entry.namespace, ...fields }, message);
      return false;
    }
    this.#told = true;
    this.logger.warn(
      { kafkajs: entry.namespace, ...fields },
      `cannot reach the Kafka brokers yet (${message}); retrying for up to ` +
        `${formatDuration(this.timeoutMs)} (kafka.startupTimeout)`,
    );
    return false;
  }
}
