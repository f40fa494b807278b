import { type Message, Partitioners, type Producer, type RecordMetadata, type Transaction } from 'kafkajs';
import {
  CONCURRENT_TRANSACTIONS_RETRY_MS,
  isConcurrentTransactions,
  type KafkaProducer,
  type KafkaTransaction,
  type ProduceRequest,
  type ProduceResult,
  type ProducerOptions,
  retrying,
  type TransactionOffsets,
} from '../port/index.js';
import { KafkajsConsumer } from './consumer.js';

/** Tries of offsets meeting CONCURRENT_TRANSACTIONS: from 20 ms, doubling to 1 s (~4 s in all). */
const OFFSETS_ATTEMPTS = 10;

export function kafkajsProducerConfig(
  options: ProducerOptions,
): Parameters<import('kafkajs').Kafka['producer']>[0] {
  const idempotent = options.idempotent === true || options.transactionalId !== undefined;
  return {
    ...(idempotent ? { idempotent: true, maxInFlightRequests: 1 } : {}),
    allowAutoTopicCreation: options.allowAutoTopicCreation ?? false,
    // Keyed sends are placed the way Java clients place them (murmur2).
    createPartitioner: Partitioners.DefaultPartitioner,
    ...(options.transactionalId === undefined
      ? {}
      : {
          transactionalId: options.transactionalId,
          transactionTimeout: options.transactionTimeoutMs,
          // CONCURRENT_TRANSACTIONS after a commit: a short first backoff (growing to 30 s), unlimited as kafkajs's.
          retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: CONCURRENT_TRANSACTIONS_RETRY_MS },
        }),
  };
}

function send(sender: Producer | Transaction, request: ProduceRequest): Promise<ProduceResult[]> {
  return sender
    .send({ topic: request.topic, messages: request.messages as Message[], acks: request.acks })
    .then((metadata: RecordMetadata[]) =>
      metadata.map((m) => ({ topic: m.topicName, partition: m.partition, baseOffset: m.baseOffset })),
    );
}

export class KafkajsProducer implements KafkaProducer {
  constructor(
    readonly native: Producer,
    readonly transactional = false,
  ) {}

  async connect(): Promise<void> {
    await this.native.connect();
    if (!this.transactional) return;
    try {
      // kafkajs initialises the transactional id on the first transaction; an empty one sends nothing else.
      const tx = await this.native.transaction();
      await tx.abort();
    } catch (error) {
      await this.native.disconnect().catch(() => undefined);
      throw error;
    }
  }

  disconnect(): Promise<void> {
    return this.native.disconnect();
  }

  send(request: ProduceRequest): Promise<ProduceResult[]> {
    return send(this.native, request);
  }

  async transaction(): Promise<KafkaTransaction> {
    return new KafkajsTransaction(await this.native.transaction());
  }
}

/** A kafkajs transaction: its offsets carry the group id only (no KIP-447), so a zombie is fenced by its id. */
class KafkajsTransaction implements KafkaTransaction {
  readonly transactional = true;
  /** The offsets sent in this transaction: their group's member learns them once it commits. */
  readonly #offsets: TransactionOffsets[] = [];

  constructor(readonly native: Transaction) {}

  send(request: ProduceRequest): Promise<ProduceResult[]> {
    return send(this.native, request);
  }

  /**
   * kafkajs retries CONCURRENT_TRANSACTIONS on a send but not on `sendOffsets`' AddOffsetsToTxn, the first request
   * of a transaction of duplicates only: retried here (the request that failed added nothing to the transaction).
   */
  async sendOffsets(offsets: TransactionOffsets): Promise<void> {
    const topics = offsets.topics.map((t) => ({
      topic: t.topic,
      partitions: t.partitions.map((p) => ({ partition: p.partition, offset: p.offset })),
    }));
    await retrying(
      () => this.native.sendOffsets({ consumerGroupId: offsets.group.groupMetadata().groupId, topics }),
      (error, failures) =>
        failures >= OFFSETS_ATTEMPTS || !isConcurrentTransactions(error, 'type')
          ? undefined
          : Math.min(1_000, CONCURRENT_TRANSACTIONS_RETRY_MS * 2 ** (failures - 1)),
    );
    this.#offsets.push(offsets);
  }

  async commit(): Promise<void> {
    await this.native.commit();
    // kafkajs's consumer never hears that the group's offsets moved with the commit.
    for (const { group, topics } of this.#offsets) {
      if (group instanceof KafkajsConsumer) group.transactionCommitted(topics);
    }
  }

  abort(): Promise<void> {
    return this.native.abort();
  }

  isActive(): boolean {
    return this.native.isActive();
  }
}
