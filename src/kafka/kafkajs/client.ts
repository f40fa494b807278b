import type { Kafka } from 'kafkajs';
import type {
  GroupConsumerOptions,
  KafkaAdmin,
  KafkaClient,
  KafkaClientCapabilities,
  KafkaClientName,
  KafkaErrorClassifier,
  PartitionReader,
  ProducerOptions,
} from '../port/index.js';
import { KafkajsAdmin } from './admin.js';
import { KafkajsConsumer, kafkajsConsumerConfig } from './consumer.js';
import { kafkajsErrors } from './errors.js';
import { KafkajsPartitionReader } from './partition-reader.js';
import { KafkajsProducer, kafkajsProducerConfig } from './producer.js';
import { KAFKAJS_DEFAULT_RETRIES } from './retry.js';

/**
 * The port over a kafkajs client (`native`). Every part it makes is a kafkajs consumer, producer or admin of
 * that client, and the partition reader is a cluster object of its own built from the client's settings.
 */
export class KafkajsClient implements KafkaClient {
  readonly name: KafkaClientName = 'kafkajs';
  /** kafkajs sends a transaction's offsets with the group id only: zombies are fenced per transactional id. */
  readonly capabilities: KafkaClientCapabilities = { fencesByGroup: false };
  readonly errors: KafkaErrorClassifier = kafkajsErrors;

  /** @param retries the client's retry budget (its reads are retried with it too, see retry.ts). */
  constructor(
    readonly native: Kafka,
    readonly retries: number = KAFKAJS_DEFAULT_RETRIES,
  ) {}

  consumer(options: GroupConsumerOptions): KafkajsConsumer {
    return new KafkajsConsumer(this.native.consumer(kafkajsConsumerConfig(options)), options.groupId);
  }

  producer(options: ProducerOptions = {}): KafkajsProducer {
    return new KafkajsProducer(
      this.native.producer(kafkajsProducerConfig(options)),
      options.transactionalId !== undefined,
    );
  }

  admin(): KafkaAdmin {
    return new KafkajsAdmin(this.native.admin(), this.retries);
  }

  partitionReader(): PartitionReader {
    return new KafkajsPartitionReader(this.native, this.retries);
  }

  /** A kafkajs client holds no connection of its own: each consumer, producer and admin has its own. */
  async close(): Promise<void> {}
}
