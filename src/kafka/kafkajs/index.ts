// The Kafka port (src/kafka/port) over kafkajs: `createClient` is what `openKafkaClient` loads for
// `kafka.client = "kafkajs"`. The only place, with the Kafka adapter's public types, that imports kafkajs.
import type { Consumer, Kafka, Producer } from 'kafkajs';
import type { KafkaClientBehaviour, KafkaClientFactory, KafkaClientSettings } from '../port/index.js';
import { buildKafkajs } from './build.js';
import { KafkajsClient } from './client.js';
import { KafkajsConsumer } from './consumer.js';
import { KafkajsProducer } from './producer.js';

export { KafkajsAdmin } from './admin.js';
export { buildKafkajs } from './build.js';
export { KafkajsClient } from './client.js';
export { KafkajsConsumer } from './consumer.js';
export { isBrokerUnreachable, isFenced, kafkajsErrors, recordErrorType } from './errors.js';
export { KafkajsPartitionReader } from './partition-reader.js';
export { KafkajsProducer } from './producer.js';

/** The port's factory for kafkajs: a kafkajs client built from the settings, behind the port. */
export const createClient: KafkaClientFactory = (
  settings: KafkaClientSettings,
  behaviour: KafkaClientBehaviour,
): KafkajsClient => new KafkajsClient(buildKafkajs(settings, behaviour), behaviour.retries);

/** An existing kafkajs client behind the port (the adapter's `kafka` option, a node's injected client, tests). */
export function fromKafkajs(kafka: Kafka): KafkajsClient {
  return new KafkajsClient(kafka);
}

/** An existing kafkajs consumer of group `groupId` behind the port (the adapter's `consumer` option). */
export function fromKafkajsConsumer(consumer: Consumer, groupId: string): KafkajsConsumer {
  return new KafkajsConsumer(consumer, groupId);
}

/** An existing (plain) kafkajs producer behind the port (the adapter's `dlq.producer` option). */
export function fromKafkajsProducer(producer: Producer): KafkajsProducer {
  return new KafkajsProducer(producer);
}
