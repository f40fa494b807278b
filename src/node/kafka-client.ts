import type { Kafka } from 'kafkajs';
import type { Logger } from 'pino';
import { createKafkaClient } from '../kafka/client.js';
import type { KafkaConnection } from '../kafka/connection.js';

/**
 * The node's kafkajs client, built by the shared builder. Its retry budget rides out a broker away for a minute
 * or two (a restart, a leader election) instead of failing the batch: 20 tries, backing off to 10 s. kafkajs
 * logs go to the node's logger.
 */
export function kafkaClient(config: KafkaConnection, logger: Logger): Kafka {
  return createKafkaClient(config, { retries: 20, logger });
}
