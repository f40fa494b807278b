import {
  compatibilityPartitioner,
  type ProduceResult as LibraryProduceResult,
  type Message,
  type MessageToProduce,
  Producer,
} from '@platformatic/kafka';
import {
  type GroupMetadata,
  type KafkaProducer,
  type KafkaTransaction,
  type ProduceRequest,
  type ProduceResult,
  type ProducerOptions,
  SerialQueue,
  type TransactionOffsets,
  type TransactionPlan,
} from '../port/index.js';
import { PlatformaticGroupConsumer } from './consumer.js';
import { PartitionNotOwnedError, rethrowWithDetail, withBrokerDetail } from './errors.js';
import type { ClientContext } from './options.js';
import { toProduce } from './records.js';

/** Finds the coordinator of a group the producer does not consume with. */
type GroupCoordinatorLookup = (groupId: string) => Promise<number>;

/**
 * InitProducerId's "no producer id yet" (-1/-1). The library's default 0/0 reads as "bump producer 0's epoch",
 * answered PRODUCER_FENCED once the transactional id has state: a restarted producer could never init.
 */
const NEW_PRODUCER = { producerId: -1n, producerEpoch: -1 };

/** An open transaction of the library (its class is not exported by name). */
type Transaction = Awaited<ReturnType<Producer['beginTransaction']>>;

/** Sends `request`'s records through `send`, in the producer's queue of requests. */
async function produce(
  sends: SerialQueue,
  request: ProduceRequest,
  send: (messages: MessageToProduce[]) => Promise<LibraryProduceResult>,
): Promise<ProduceResult[]> {
  const messages = request.messages.map((m) => toProduce(request.topic, m));
  try {
    const { offsets = [] } = await sends.run(() => send(messages));
    return offsets.map(({ topic, partition, offset }) => ({ topic, partition, baseOffset: String(offset) }));
  } catch (error) {
    throw withBrokerDetail(error);
  }
}

/** An idempotent producer (Java's murmur2 partitioner); with a transactional id, KIP-447 transactions. */
export class PlatformaticProducer implements KafkaProducer {
  #producer: Producer | undefined;
  /**
   * Every produce request, its transactions' included, one at a time (as kafkajs's maxInFlightRequests 1): the
   * library advances a sequence number when the broker answers: a second send in flight reuses it and is dropped.
   */
  readonly #sends = new SerialQueue();

  constructor(
    private readonly context: ClientContext,
    private readonly settings: ProducerOptions,
    private readonly coordinator: GroupCoordinatorLookup,
  ) {}

  async connect(): Promise<void> {
    if (this.#producer) return;
    const transactionalId = this.settings.transactionalId;
    const producer = new Producer({
      ...this.context.base,
      // Every producer of the package is idempotent; a transactional one must be.
      idempotent: this.settings.idempotent !== false || transactionalId !== undefined,
      partitioner: compatibilityPartitioner,
      ...(transactionalId === undefined
        ? {}
        : {
            transactionalId,
            // The library sends its request timeout as the transaction timeout (InitProducerId).
            timeout: this.settings.transactionTimeoutMs ?? 60_000,
          }),
    });
    this.context.watch(producer);
    try {
      if (transactionalId !== undefined) {
        // InitProducerId now, as promised: the library sends it with a first transaction, begun and dropped.
        const transaction = await producer.beginTransaction(NEW_PRODUCER);
        await transaction.cancel();
      } else {
        await producer.metadata({ topics: [] });
      }
    } catch (error) {
      // Not kept, so never closed: its connections would stay open, more on each retried connect.
      await producer.close(true).catch(() => undefined);
      throw error;
    }
    this.#producer = producer;
  }

  async disconnect(): Promise<void> {
    const producer = this.#producer;
    this.#producer = undefined;
    await producer?.close(true);
  }

  #need(): Producer {
    if (!this.#producer) throw new Error('Kafka producer: connect() first');
    return this.#producer;
  }

  async send(request: ProduceRequest): Promise<ProduceResult[]> {
    const producer = this.#need();
    // An idempotent producer only sends acks = all; `acks` only matters for a plain one.
    const acks = this.settings.idempotent === false ? { acks: request.acks ?? -1 } : {};
    return produce(this.#sends, request, (messages) => producer.send({ messages, ...acks }));
  }

  async transaction(): Promise<KafkaTransaction> {
    if (this.settings.transactionalId === undefined) {
      throw new Error('Kafka producer: transaction() needs a transactionalId');
    }
    const producer = this.#need();
    const before = producer.transaction;
    let transaction: Transaction;
    try {
      transaction = await producer.beginTransaction(NEW_PRODUCER);
    } catch (error) {
      // Made active before FindCoordinator (or a fenced InitProducerId) and kept when they fail, it would
      // fail every later begin. It sent nothing: dropped, unless an older active one refused this begin.
      const made = producer.transaction;
      if (made !== undefined && made !== before) await made.cancel().catch(() => undefined);
      throw withBrokerDetail(error);
    }
    return new PlatformaticTransaction(transaction, this.coordinator, this.#sends, producer);
  }
}

/** An open transaction; its offsets go one partition at a time (the library merges concurrent ones). */
class PlatformaticTransaction implements KafkaTransaction {
  readonly transactional = true;
  #active = true;
  readonly #groups = new Set<string>();

  constructor(
    private readonly transaction: Transaction,
    private readonly coordinator: GroupCoordinatorLookup,
    private readonly sends: SerialQueue,
    private readonly producer: Producer,
  ) {}

  /** The plan's partitions in one AddPartitionsToTxn, sent beside its group's AddOffsetsToTxn. */
  async prepare(plan: TransactionPlan): Promise<void> {
    const topics = plan.partitions.map((p) => p.topic);
    // The library's send adds what is new from its records' topic and partition only.
    const records = plan.partitions.flatMap(({ topic, partitions }) =>
      partitions.map((partition) => ({ topic, partition })),
    );
    const metadata = await this.producer.metadata({ topics });
    // Both settled before either's failure is raised: the library shares a request in flight with any later one
    // of the same name, so one left running would answer for the next transaction's, registering nothing in it.
    const [partitions, group] = await Promise.allSettled([
      this.transaction.addPartitions(metadata, records as never),
      this.#addGroup(plan.groupId),
    ]);
    for (const step of [partitions, group]) if (step.status === 'rejected') rethrowWithDetail(step.reason);
  }

  /** AddOffsetsToTxn, once per group (the library only reads the consumer's group id). */
  async #addGroup(groupId: string): Promise<void> {
    if (this.#groups.has(groupId)) return;
    await this.transaction.addConsumer({ groupId } as never);
    this.#groups.add(groupId);
  }

  send(request: ProduceRequest): Promise<ProduceResult[]> {
    return produce(this.sends, request, (messages) => this.transaction.send({ messages }));
  }

  async sendOffsets(offsets: TransactionOffsets): Promise<void> {
    const source = offsets.group;
    const group: GroupMetadata = source.groupMetadata();
    let coordinatorId: number | undefined;
    if (source instanceof PlatformaticGroupConsumer) {
      // The member's current generation is sent: refuse a partition it no longer owns, which the group would
      // otherwise accept from this zombie (the library rejoins by itself, with no revocation step).
      for (const { topic, partitions } of offsets.topics) {
        for (const { partition } of partitions) {
          if (!source.owns(topic, partition)) {
            throw new PartitionNotOwnedError(
              `group ${group.groupId} generation ${group.generationId}: this member no longer owns ` +
                `${topic}[${partition}]; its transaction must be aborted`,
            );
          }
        }
      }
      coordinatorId = source.coordinatorId();
    }
    coordinatorId ??= await this.coordinator(group.groupId);
    await this.#addGroup(group.groupId);
    const consumer = {
      groupId: group.groupId,
      // -1 / '': a group source that knows no generation (offsets then checked by group id only).
      generationId: group.generationId ?? -1,
      memberId: group.memberId ?? '',
      coordinatorId,
    };
    for (const { topic, partitions } of offsets.topics) {
      for (const { partition, offset } of partitions) {
        // TxnOffsetCommit commits `offset + 1` of the message it is given: hand it the last handled record.
        const message = { topic, partition, offset: BigInt(offset) - 1n, metadata: { consumer } };
        await this.transaction.addOffset(message as unknown as Message).catch(rethrowWithDetail);
      }
    }
  }

  async commit(): Promise<void> {
    this.#active = false;
    await this.transaction.commit().catch(rethrowWithDetail);
  }

  async abort(): Promise<void> {
    this.#active = false;
    await this.transaction.abort().catch(rethrowWithDetail);
  }

  isActive(): boolean {
    return this.#active;
  }
}
