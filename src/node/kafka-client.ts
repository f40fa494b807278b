import type { Logger } from 'pino';
import type { KafkaConnection } from '../kafka/connection.js';
import { type KafkaClient, type KafkaLogEntry, openKafkaClient } from '../kafka/port/index.js';
import { formatDuration } from '../util/duration.js';

/**
 * The node's Kafka client (`kafka.client`), opened by the port's one factory. Its retry budget rides out a broker
 * away for a minute or two (a restart, a leader election) instead of failing the batch: 20 tries, backing off to
 * 10 s. The client's log goes to the node's logger; while the node starts, `startup` reports connection retries
 * once.
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
  /** The last connection error the client reported during the start. */
  lastError: string | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly timeoutMs: number,
  ) {}

  /** The start is over: the client's log passes through unchanged from now on. */
  started(): void {
    this.#starting = false;
  }

  /** Whether the client's entry is logged as it is. */
  sees(entry: KafkaLogEntry): boolean {
    if (!this.#starting || entry.connectionFailure === undefined) return true;
    this.lastError = entry.connectionFailure;
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
