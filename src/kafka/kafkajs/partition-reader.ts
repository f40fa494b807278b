import type { Kafka } from 'kafkajs';
import { RepositoryError } from '../../errors.js';
import { decodeFetchV11 } from '../changelog/fetch-decoder.js';
import {
  type FetchedPartition,
  fetchByLeader,
  type PartitionFetch,
  type PartitionReader,
  type RecordBatch,
  SerialQueue,
} from '../port/index.js';
import { sortedIds } from './admin.js';
import { OFFSET_OUT_OF_RANGE as OUT_OF_RANGE_NAME, retryRead } from './errors.js';
import { KAFKAJS_DEFAULT_RETRIES } from './options.js';

/*
 * kafkajs's only reader is a group consumer, and a throwaway group pays a group join per restore (3 s with the
 * default group.initial.rebalance.delay.ms). So the reader talks to the partition leaders through the client's
 * own cluster object (metadata, ListOffsets, Fetch): not public API, so reached once, here, and checked; kafkajs
 * is pinned at 2.x (its last line) and the changelog tests run every call below against a real broker.
 */

/** One decoded record of a fetch response, as kafkajs's RecordBatch decoder returns it. */
interface RawRecord {
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, Buffer | string | (Buffer | string)[] | undefined>;
  readonly isControlRecord: boolean;
  readonly batchContext: {
    readonly firstOffset: string;
    readonly lastOffsetDelta: number;
    readonly producerId: string;
    readonly inTransaction: boolean;
  };
}

interface RawPartition {
  readonly partition: number;
  readonly errorCode: number;
  readonly abortedTransactions?: readonly { readonly producerId: string; readonly firstOffset: string }[];
  readonly messages: readonly RawRecord[];
}

interface RawBroker {
  fetch(request: {
    isolationLevel: number;
    maxWaitTime: number;
    minBytes: number;
    maxBytes: number;
    topics: { topic: string; partitions: { partition: number; fetchOffset: string; maxBytes: number }[] }[];
  }): Promise<{ responses: { topicName: string; partitions: RawPartition[] }[] } | OwnDecoded>;
}

/** A fetch response decoded by {@link decodeFetchV11} rather than by kafkajs. */
interface OwnDecoded {
  readonly own: FetchedPartition[];
  readonly clientSideThrottleTime: number;
}

interface RawCluster {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  isConnected(): boolean;
  refreshMetadata(): Promise<void>;
  addTargetTopic(topic: string): Promise<void>;
  findTopicPartitionMetadata(topic: string): { partitionId: number; leader: number }[];
  findBroker(where: { nodeId: string }): Promise<RawBroker>;
  fetchTopicsOffset(
    topics: { topic: string; partitions: { partition: number }[]; fromBeginning: boolean }[],
  ): Promise<{ topic: string; partitions: { partition: number; offset: string }[] }[]>;
}

const READ_COMMITTED = 1;

/** A read_committed cluster connection built from the client's own settings (brokers, TLS, SASL, retries). */
function createCluster(kafka: Kafka): RawCluster {
  const symbol = Object.getOwnPropertySymbols(kafka).find(
    (s) => s.description === 'private:Kafka:createCluster',
  );
  const create = symbol === undefined ? undefined : (kafka as unknown as Record<symbol, unknown>)[symbol];
  if (typeof create !== 'function') {
    throw new RepositoryError(
      'the changelog reader needs kafkajs 2.x (its cluster factory was not found on the Kafka client)',
      { retryable: false },
    );
  }
  return create({ allowAutoTopicCreation: false, isolationLevel: READ_COMMITTED }) as RawCluster;
}

const FETCH_API_KEY = 1;
const OFFSET_OUT_OF_RANGE = 1;
const withOwnDecoder = new WeakSet<object>();

interface ProtocolRequest {
  readonly request?: { readonly apiKey?: number; readonly apiVersion?: number };
  readonly response: { decode(payload: Buffer): Promise<unknown>; parse(data: unknown): Promise<unknown> };
}

/** Makes this broker connection of the reader's own cluster decode Fetch v11 with {@link decodeFetchV11}. */
function useOwnFetchDecoder(broker: RawBroker): void {
  if (withOwnDecoder.has(broker)) return;
  withOwnDecoder.add(broker);
  const prototype = Object.getPrototypeOf(broker) as Record<symbol, unknown>;
  const symbol = Object.getOwnPropertySymbols(prototype).find(
    (s) => s.description === 'private:Broker:sendRequest',
  );
  const send = symbol === undefined ? undefined : prototype[symbol];
  if (symbol === undefined || typeof send !== 'function') return; // kafkajs decodes, as any consumer's would
  (broker as unknown as Record<symbol, unknown>)[symbol] = function (this: unknown, call: ProtocolRequest) {
    if (call.request?.apiKey !== FETCH_API_KEY || call.request.apiVersion !== 11)
      return send.call(this, call);
    const { response } = call;
    return send.call(this, {
      ...call,
      response: {
        decode: async (payload: Buffer) => {
          const own = decodeFetchV11(payload);
          return own === undefined
            ? response.decode(payload)
            : { own, clientSideThrottleTime: payload.readInt32BE(0) };
        },
        parse: async (data: unknown) => ((data as Partial<OwnDecoded>).own ? data : response.parse(data)),
      },
    });
  };
}

/** A partition error as kafkajs would raise it, for the reader's recovery. */
function partitionError(topic: string, part: FetchedPartition): Error {
  const where = `on ${topic}[${part.partition}]`;
  // Else leader moves, unknown partitions while metadata catches up, broker restarts: retried after a refresh.
  const outOfRange = part.errorCode === OFFSET_OUT_OF_RANGE;
  const message = outOfRange ? `offset out of range ${where}` : `fetch error code ${part.errorCode} ${where}`;
  const name = outOfRange ? OUT_OF_RANGE_NAME : 'KafkaJSProtocolError';
  return Object.assign(new Error(message), { name, retriable: !outOfRange });
}

/** One fetch of the given partitions from their leader, decoded into record batches. */
async function fetchBatches(
  broker: RawBroker,
  request: Parameters<RawBroker['fetch']>[0],
): Promise<FetchedPartition[]> {
  useOwnFetchDecoder(broker);
  const topic = request.topics[0]?.topic ?? '';
  const response = await broker.fetch(request);
  if ('own' in response) {
    const failed = response.own.find((p) => p.errorCode !== 0);
    if (failed !== undefined) throw partitionError(topic, failed);
    return response.own;
  }
  return response.responses.flatMap((r) => r.partitions.map(fromKafkajs));
}

/** A partition as kafkajs decoded it, regrouped into record batches. */
function fromKafkajs(part: RawPartition): FetchedPartition {
  const batches: RecordBatch[] = [];
  let current: RecordBatch | undefined;
  for (const message of part.messages) {
    const context = message.batchContext;
    if (current === undefined || current.baseOffset !== Number(context.firstOffset)) {
      current = {
        baseOffset: Number(context.firstOffset),
        lastOffsetDelta: context.lastOffsetDelta,
        producerId: Number(context.producerId),
        inTransaction: context.inTransaction,
        isControl: message.isControlRecord,
        records: [],
      };
      batches.push(current);
    }
    current.records.push({
      offset: Number(message.offset),
      key: message.key === null ? null : message.key.toString('utf8'),
      value: message.value,
      headers: message.headers as Record<string, Buffer>,
    });
  }
  return {
    partition: part.partition,
    errorCode: part.errorCode,
    abortedTransactions: (part.abortedTransactions ?? []).map((t) => ({
      producerId: Number(t.producerId),
      firstOffset: Number(t.firstOffset),
    })),
    batches,
  };
}

/** The port's {@link PartitionReader} over a read_committed kafkajs cluster object of its own. */
export class KafkajsPartitionReader implements PartitionReader {
  readonly #cluster: RawCluster;
  readonly #topics = new Set<string>();
  #connecting: Promise<void> | undefined;
  /**
   * The cluster calls that may open broker connections, one at a time: kafkajs connects a broker on first use,
   * and two concurrent first uses open two sockets, one never closed. Fetches themselves run concurrently.
   */
  readonly #queue = new SerialQueue();
  /** Broker connections that have served a fetch, so their fetch connection is open. */
  readonly #fetched = new WeakSet<object>();

  /** @param retries the budget of {@link listOffsets}'s own retries. */
  constructor(
    kafka: Kafka,
    readonly retries: number = KAFKAJS_DEFAULT_RETRIES,
  ) {
    this.#cluster = createCluster(kafka);
  }

  async partitions(topic: string): Promise<number[]> {
    await this.#ready(topic);
    await this.#queue.run(() => this.#cluster.refreshMetadata());
    return sortedIds(this.#cluster.findTopicPartitionMetadata(topic));
  }

  async listOffsets(
    topic: string,
    partitions: readonly number[],
    which: 'earliest' | 'latest',
  ): Promise<Map<number, number>> {
    const asked = [
      {
        topic,
        partitions: partitions.map((partition) => ({ partition })),
        fromBeginning: which === 'earliest',
      },
    ];
    const [result] = await retryRead(this.retries, async (again) => {
      await this.#ready(topic);
      // A retry reaches the leaders of now: kafkajs sends ListOffsets to the leader its metadata names.
      if (again) await this.#queue.run(() => this.#cluster.refreshMetadata());
      return this.#queue.run(() => this.#cluster.fetchTopicsOffset(asked));
    });
    return new Map((result?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  }

  async fetch(request: PartitionFetch): Promise<FetchedPartition[]> {
    const { topic } = request;
    await this.#ready(topic);
    const metadata = this.#cluster.findTopicPartitionMetadata(topic);
    const leaderOf = (p: number) => metadata.find((m) => m.partitionId === p)?.leader;
    return fetchByLeader(request, leaderOf, async (leader, ps) => {
      const broker = await this.#queue.run(() => this.#cluster.findBroker({ nodeId: String(leader) }));
      const maxBytes = request.maxBytesPerPartition;
      const partitions = ps.map(({ partition, offset }) => ({
        partition,
        fetchOffset: String(offset),
        maxBytes,
      }));
      const fetch: Parameters<typeof fetchBatches>[1] = {
        isolationLevel: READ_COMMITTED,
        maxWaitTime: request.maxWaitMs,
        minBytes: 1,
        maxBytes: request.maxBytes,
        topics: [{ topic, partitions }],
      };
      // A broker's first fetch opens its fetch connection: it queues like the other connecting calls.
      if (this.#fetched.has(broker)) return fetchBatches(broker, fetch);
      const batches = await this.#queue.run(() => fetchBatches(broker, fetch));
      this.#fetched.add(broker);
      return batches;
    });
  }

  async refreshMetadata(): Promise<void> {
    await this.#queue.run(() => this.#cluster.refreshMetadata());
  }

  async close(): Promise<void> {
    await this.#cluster.disconnect();
  }

  async #ready(topic: string): Promise<void> {
    if (!this.#cluster.isConnected()) {
      this.#connecting ??= this.#cluster.connect().finally(() => {
        this.#connecting = undefined;
      });
      await this.#connecting;
    }
    if (!this.#topics.has(topic)) {
      await this.#queue.run(() => this.#cluster.addTargetTopic(topic));
      this.#topics.add(topic);
    }
  }
}
