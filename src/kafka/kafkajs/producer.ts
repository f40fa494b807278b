import { type Message, Partitioners, type Producer, type RecordMetadata, type Transaction } from 'kafkajs';
import {
  CONCURRENT_TRANSACTIONS_RETRY_MS,
  type KafkaProducer,
  type KafkaTransaction,
  type ProduceRequest,
  type ProduceResult,
  type ProducerOptions,
  type TransactionOffsets,
} from '../port/index.js';
import { KafkajsConsumer } from './consumer.js';
import { isConcurrentTransactions } from './errors.js';

/**
 * Attempts of a transaction's offsets that meet CONCURRENT_TRANSACTIONS, backing off from
 * CONCURRENT_TRANSACTIONS_RETRY_MS (doubling, at most 1 s: about 4 s in all); then the error is the caller's.
 */
const OFFSETS_ATTEMPTS = 10;

/** The kafkajs producer config for the port's options. */
export function kafkajsProducerConfig(
  options: ProducerOptions,
): Parameters<import('kafkajs').Kafka['producer']>[0] {
  const idempotent = options.idempotent === true || options.transactionalId !== undefined;
  return {
    ...(idempotent ? { idempotent: true, maxInFlightRequests: 1 } : {}),
    allowAutoTopicCreation: options.allowAutoTopicCreation ?? false,
    // Dead letters and keyed sends are placed by key the way Java clients place them (murmur2).
    createPartitioner: Partitioners.DefaultPartitioner,
    ...(options.transactionalId === undefined
      ? {}
      : {
          transactionalId: options.transactionalId,
          ...(options.transactionTimeoutMs === undefined
            ? {}
            : { transactionTimeout: options.transactionTimeoutMs }),
          // The first request of a transaction that follows a commit often meets CONCURRENT_TRANSACTIONS (the
          // coordinator is still writing the last one's markers, a few ms). kafkajs retries it after its default
          // 300 ms backoff, which made each chunk wait ~0.3 s; a short first backoff retries once the markers are
          // down. Unlimited retries as kafkajs sets for an idempotent producer; the backoff still grows to 30 s.
          retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: CONCURRENT_TRANSACTIONS_RETRY_MS },
        }),
  };
}

/** kafkajs's answer to a produce request, as the port gives it. */
function results(metadata: readonly RecordMetadata[]): ProduceResult[] {
  return metadata.map((m) => ({ topic: m.topicName, partition: m.partition, baseOffset: m.baseOffset }));
}

function send(sender: Producer | Transaction, request: ProduceRequest): Promise<ProduceResult[]> {
  return sender
    .send({
      topic: request.topic,
      messages: request.messages as Message[],
      ...(request.acks === undefined ? {} : { acks: request.acks }),
    })
    .then(results);
}

/** A kafkajs producer behind the port. `native` is the kafkajs producer itself. */
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

/**
 * A kafkajs transaction. kafkajs's `sendOffsets` sends the group id only (no generation, no member id: no
 * KIP-447), so the group cannot fence a zombie: the node keeps one transactional id per input partition.
 */
class KafkajsTransaction implements KafkaTransaction {
  /** The offsets sent in this transaction: their group's member learns them once it commits. */
  readonly #offsets: TransactionOffsets[] = [];

  constructor(readonly native: Transaction) {}

  send(request: ProduceRequest): Promise<ProduceResult[]> {
    return send(this.native, request);
  }

  /**
   * kafkajs retries CONCURRENT_TRANSACTIONS on a send (its retry config, see kafkajsProducerConfig) but not on the
   * AddOffsetsToTxn of `sendOffsets`, which then rejected whenever the offsets were a transaction's first request
   * right after a commit (an exactly-once chunk of duplicates only): the chunk was aborted and read again. Retried
   * here: the request that failed added nothing to the transaction.
   */
  async sendOffsets(offsets: TransactionOffsets): Promise<void> {
    const topics = offsets.topics.map((t) => ({
      topic: t.topic,
      partitions: t.partitions.map((p) => ({ partition: p.partition, offset: p.offset })),
    }));
    for (let attempt = 1; ; attempt++) {
      try {
        await this.native.sendOffsets({ consumerGroupId: offsets.group.groupMetadata().groupId, topics });
        break;
      } catch (error) {
        if (attempt >= OFFSETS_ATTEMPTS || !isConcurrentTransactions(error)) throw error;
        const backoff = Math.min(1_000, CONCURRENT_TRANSACTIONS_RETRY_MS * 2 ** (attempt - 1));
        await new Promise((resolve) => setTimeout(resolve, backoff));
      }
    }
    this.#offsets.push(offsets);
  }

  async commit(): Promise<void> {
    await this.native.commit();
    // The group's offsets moved with the commit; kafkajs's consumer never hears of it (see transactionCommitted).
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
