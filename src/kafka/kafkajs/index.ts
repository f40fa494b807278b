// The Kafka port over kafkajs, loaded by `openKafkaClient` for `kafka.client = "kafkajs"`. With the Kafka
// adapter's public types, the only place that imports kafkajs.
import type { Consumer, Kafka, Producer } from 'kafkajs';
import type {
  GroupConsumerOptions,
  KafkaAdmin,
  KafkaClient,
  KafkaClientCapabilities,
  KafkaClientFactory,
  KafkaClientName,
  KafkaErrorClassifier,
  PartitionReader,
  ProducerOptions,
} from '../port/index.js';
import { KafkajsAdmin } from './admin.js';
import { KafkajsConsumer, kafkajsConsumerConfig } from './consumer.js';
import { kafkajsErrors } from './errors.js';
import { buildKafkajs, KAFKAJS_DEFAULT_RETRIES } from './options.js';
import { KafkajsPartitionReader } from './partition-reader.js';
import { KafkajsProducer, kafkajsProducerConfig } from './producer.js';

export { KafkajsAdmin } from './admin.js';
export { kafkajsErrors, recordErrorType } from './errors.js';
export { KafkajsProducer } from './producer.js';

/** The port over a kafkajs client: its consumers, producers and admins, and a partition reader of its own. */
class KafkajsClient implements KafkaClient {
  readonly name: KafkaClientName = 'kafkajs';
  /** kafkajs sends a transaction's offsets with the group id only: zombies are fenced per transactional id. */
  readonly capabilities: KafkaClientCapabilities = { fencesByGroup: false };
  readonly errors: KafkaErrorClassifier = kafkajsErrors;

  /** @param retries the client's retry budget, also of the reads retried by `retryUnreachable`. */
  constructor(
    readonly native: Kafka,
    readonly retries: number = KAFKAJS_DEFAULT_RETRIES,
  ) {}

  consumer(options: GroupConsumerOptions): KafkajsConsumer {
    return new KafkajsConsumer(this.native.consumer(kafkajsConsumerConfig(options)), options.groupId);
  }

  producer(options: ProducerOptions = {}): KafkajsProducer {
    const native = this.native.producer(kafkajsProducerConfig(options));
    return new KafkajsProducer(native, options.transactionalId !== undefined);
  }

  admin(): KafkaAdmin {
    return new KafkajsAdmin(this.native.admin(), this.retries);
  }

  partitionReader(): PartitionReader {
    return new KafkajsPartitionReader(this.native, this.retries);
  }

  /** Each consumer, producer and admin holds its own connections. */
  async close(): Promise<void> {}
}

export const createClient: KafkaClientFactory = (settings, behaviour) =>
  new KafkajsClient(buildKafkajs(settings, behaviour), behaviour.retries);

/** An existing kafkajs client behind the port (the adapter's `kafka` option, tests). */
export function fromKafkajs(kafka: Kafka): KafkaClient {
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
