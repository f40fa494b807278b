import type { KafkaErrorClassifier } from '../port/index.js';

/*
 * What kafkajs's errors mean. kafkajs raises a broker error as a KafkaJSProtocolError whose `type` is the
 * broker's error name, often wrapped (a KafkaJSNonRetriableError, a retry's `cause`); its own failures are told
 * apart by class name (`name`).
 */

/**
 * Broker error types telling a transactional producer that a newer one with its transactional id exists (the
 * partition's new owner): its transaction can never commit.
 */
const FENCED_ERRORS = new Set(['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED']);

const CONCURRENT_TRANSACTIONS = new Set(['CONCURRENT_TRANSACTIONS']);

/**
 * Broker error types that condemn the records of the request rather than the request: no retry can pass them,
 * so the writer splits the request to find the records at fault.
 */
const RECORD_ERRORS = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'INVALID_TIMESTAMP',
]);

/** The chain of `error` and the causes it wraps (at most five deep). */
function* causes(error: unknown): Generator<object> {
  for (let e = error, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    yield e;
    e = (e as { cause?: unknown }).cause;
  }
}

/** The first broker error type in the chain that is in `types`. */
function brokerType(error: unknown, types: ReadonlySet<string>): string | undefined {
  for (const e of causes(error)) {
    const type = (e as { type?: unknown }).type;
    if (typeof type === 'string' && types.has(type)) return type;
  }
  return undefined;
}

/** True when `error` (or a cause it wraps) is the coordinator's CONCURRENT_TRANSACTIONS (the last one still ending). */
export function isConcurrentTransactions(error: unknown): boolean {
  return brokerType(error, CONCURRENT_TRANSACTIONS) !== undefined;
}

/** True when `error` (or a cause it wraps) says this transactional producer was fenced by a newer one. */
export function isFenced(error: unknown): boolean {
  return brokerType(error, FENCED_ERRORS) !== undefined;
}

/** The broker error type that condemns the records (e.g. `MESSAGE_TOO_LARGE`), looking through wrapped causes. */
export function recordErrorType(error: unknown): string | undefined {
  return brokerType(error, RECORD_ERRORS);
}

/**
 * Errors kafkajs does not retry although they only say that no broker could be reached: the group coordinator
 * lookup found no broker answering (kafkajs bails out of it at once when every connection is refused).
 */
export function isBrokerUnreachable(error: unknown): boolean {
  for (const e of causes(error)) {
    if (!(e instanceof Error)) return false;
    if (e.name === 'KafkaJSGroupCoordinatorNotFound' || e.name === 'KafkaJSConnectionError') return true;
    // A request whose connection closed under it (the broker stopping): as unreachable as a refused connect.
    if (e.name === 'KafkaJSConnectionClosedError') return true;
    if (e.name === 'KafkaJSBrokerNotFound') return true;
  }
  return false;
}

/** The name the partition reader gives a fetch that asked for an offset out of range (see partition-reader.ts). */
export const OFFSET_OUT_OF_RANGE = 'KafkaJSOffsetOutOfRange';

/** The kafkajs errors of one client, as the port classifies them. */
export const kafkajsErrors: KafkaErrorClassifier = {
  isFenced,
  recordErrorType,
  isBrokerUnreachable,
  isOffsetOutOfRange: (error) => (error as { name?: unknown } | null)?.name === OFFSET_OUT_OF_RANGE,
  isPermanent: (error) => {
    // kafkajs marks an error it gave up on non-retriable (KafkaJSNumberOfRetriesExceeded, a wrapped connection
    // error): a broker that could not be reached may be back for the next try all the same.
    if (isBrokerUnreachable(error)) return false;
    const { name, retriable } = (error ?? {}) as { name?: string; retriable?: boolean };
    return retriable === false && name !== 'KafkaJSConnectionError';
  },
};
