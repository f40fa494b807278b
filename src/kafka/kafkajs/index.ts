// The port over kafkajs: with the adapter's public types, the only kafkajs import. kafkajs reads an undefined
// setting as its default, so the port's optional ones are passed as they are.
import type { Kafka } from 'kafkajs';
import type { KafkaClient, KafkaClientFactory } from '../port/index.js';
import { KafkajsAdmin } from './admin.js';
import { KafkajsConsumer, kafkajsConsumerConfig } from './consumer.js';
import { kafkajsErrors } from './errors.js';
import { buildKafkajs, KAFKAJS_DEFAULT_RETRIES } from './options.js';
import { KafkajsPartitionReader } from './partition-reader.js';
import { KafkajsProducer, kafkajsProducerConfig } from './producer.js';

export { KafkajsAdmin } from './admin.js';
// The adapter wraps a caller's own kafkajs consumer and (plain) DLQ producer in these.
export { KafkajsConsumer } from './consumer.js';
export { kafkajsErrors, recordErrorType } from './errors.js';
export { KafkajsProducer } from './producer.js';

/** The port over a kafkajs client: its consumers, producers and admins, and a partition reader of its own. */
function kafkajsClient(native: Kafka, retries = KAFKAJS_DEFAULT_RETRIES): KafkaClient {
  return {
    name: 'kafkajs',
    // kafkajs sends a transaction's offsets with the group id only: zombies are fenced per transactional id.
    capabilities: { fencesByGroup: false },
    errors: kafkajsErrors,
    consumer: (options) =>
      new KafkajsConsumer(native.consumer(kafkajsConsumerConfig(options)), options.groupId),
    producer: (options = {}) =>
      new KafkajsProducer(
        native.producer(kafkajsProducerConfig(options)),
        options.transactionalId !== undefined,
      ),
    // `retries` also bounds the reads retried by `retryRead`.
    admin: () => new KafkajsAdmin(native.admin(), retries),
    partitionReader: () => new KafkajsPartitionReader(native, retries),
    // Each consumer, producer and admin holds its own connections.
    close: async () => {},
  };
}

export const createClient: KafkaClientFactory = (settings, behaviour) =>
  kafkajsClient(buildKafkajs(settings, behaviour), behaviour.retries);

/** An existing kafkajs client behind the port (the adapter's `kafka` option, tests). */
export const fromKafkajs = (kafka: Kafka): KafkaClient => kafkajsClient(kafka);
