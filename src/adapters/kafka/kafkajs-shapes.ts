// kafkajs's objects as the adapter's options take them, as structural shapes: the adapter's types never
// import kafkajs. Parameters are `never`: only the kafkajs implementation, with kafkajs's types, calls them.

/** A kafkajs `Kafka` instance, as the adapter's `kafka` option takes it (it makes consumers and producers). */
export interface KafkajsKafka {
  consumer(config: never): unknown;
  producer(config?: never): unknown;
  admin(config?: never): unknown;
}

/** A kafkajs `Consumer` (not yet running), as the adapter's `consumer` option takes it. */
export interface KafkajsConsumer {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  subscribe(subscription: never): Promise<void>;
  run(config?: never): Promise<void>;
  stop(): Promise<void>;
  pause(topics: never): void;
  resume(topics: never): void;
  commitOffsets(offsets: never): Promise<void>;
}

/** A kafkajs `Producer`, as the adapter's `dlq.producer` option takes it. */
export interface KafkajsProducer {
  connect(): Promise<void>;
  disconnect(): Promise<void>;
  send(record: never): Promise<unknown>;
}

/**
 * Extra settings of a consumer the adapter creates: the keys of a kafkajs `ConsumerConfig` but `groupId`. kafkajs
 * reads them; `@platformatic/kafka` ignores them (its settings come from the connection and the adapter's own).
 */
export interface AdapterConsumerConfig {
  readonly sessionTimeout?: number;
  readonly rebalanceTimeout?: number;
  readonly heartbeatInterval?: number;
  readonly metadataMaxAge?: number;
  readonly allowAutoTopicCreation?: boolean;
  readonly maxBytesPerPartition?: number;
  readonly minBytes?: number;
  readonly maxBytes?: number;
  readonly maxWaitTimeInMs?: number;
  readonly readUncommitted?: boolean;
  readonly maxInFlightRequests?: number;
  readonly rackId?: string;
  /** Any other key is passed to the client as is; a client ignores the keys it does not know. */
  readonly [key: string]: unknown;
}
