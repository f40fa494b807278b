import type { Logger } from 'pino';
import { StartupTimeoutError } from '../errors.js';
import type { KafkaConnection } from '../kafka/connection.js';
import { type KafkaClient, type KafkaLogEntry, openKafkaClient } from '../kafka/port/index.js';
import { formatDuration } from '../util/duration.js';

/**
 * The node's Kafka client (`kafka.client`). Its retry budget (20 tries, backing off to 10 s) rides out a broker
 * away for a minute or two instead of failing the batch. While the node starts, `startup` sees the client's log.
 */
export function kafkaClient(
  config: KafkaConnection,
  logger: Logger,
  startup?: StartupWatch,
): Promise<KafkaClient> {
  return openKafkaClient(
    config,
    {
      retries: 20,
      logger,
      ...(startup ? { onLog: (entry: KafkaLogEntry) => startup.sees(entry) } : {}),
    },
    { configKey: 'kafka.client', feature: 'idem node' },
  );
}

/**
 * The node's start, as seen through the client's log: while it lasts, a failed connection attempt is logged once
 * (kafkajs logs every one of its 20 tries, twice), and the last one is kept for the line that gives up.
 */
export class StartupWatch {
  #starting = true;
  #told = false;
  #lastError: string | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly timeoutMs: number,
  ) {}

  /** The start is over: the client's log passes through unchanged from now on. */
  started(): void {
    this.#starting = false;
  }

  /** The start timed out: what did not answer, and the last connection error the client reported. */
  timedOut(brokers: readonly string[]): StartupTimeoutError {
    return new StartupTimeoutError(
      `the Kafka brokers ${brokers.join(', ')} did not answer within ${formatDuration(this.timeoutMs)} ` +
        `(kafka.startupTimeout): ${this.#lastError ?? 'the start did not finish'}`,
    );
  }

  /** Whether the client's entry is logged as it is. */
  sees(entry: KafkaLogEntry): boolean {
    if (!this.#starting || entry.connectionFailure === undefined) return true;
    this.#lastError = entry.connectionFailure;
    if (this.#told) {
      this.logger.debug(entry.fields, entry.message);
      return false;
    }
    this.#told = true;
    this.logger.warn(
      entry.fields,
      `cannot reach the Kafka brokers yet (${entry.message}); retrying for up to ` +
        `${formatDuration(this.timeoutMs)} (kafka.startupTimeout)`,
    );
    return false;
  }
}
