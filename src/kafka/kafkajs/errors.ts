import {
  brokerError,
  errorTree,
  type KafkaErrorClassifier,
  PRODUCER_FENCED_ERRORS,
  RECORD_ERRORS,
  retryBackoffMs,
} from '../port/index.js';

// kafkajs raises a broker error as a KafkaJSProtocolError whose `type` is the broker's error name, often wrapped
// (a KafkaJSNonRetriableError, a retry's `cause`); its own failures are told apart by class name.

const FENCED = new Set<string>(PRODUCER_FENCED_ERRORS);
const CONCURRENT_TRANSACTIONS = new Set(['CONCURRENT_TRANSACTIONS']);
/** No broker answered; kafkajs gives up at once on these (every connection refused, one closed under a request). */
const UNREACHABLE = new Set([
  'KafkaJSGroupCoordinatorNotFound',
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSBrokerNotFound',
]);

/** The coordinator is still ending this producer's last transaction (for a few ms after every commit). */
export function isConcurrentTransactions(error: unknown): boolean {
  return brokerError(error, 'type', CONCURRENT_TRANSACTIONS) !== undefined;
}

export function isBrokerUnreachable(error: unknown): boolean {
  for (const e of errorTree(error)) if (typeof e.name === 'string' && UNREACHABLE.has(e.name)) return true;
  return false;
}

export function recordErrorType(error: unknown): string | undefined {
  return brokerError(error, 'type', RECORD_ERRORS);
}

/** The name the partition reader gives a fetch of an offset out of range. */
export const OFFSET_OUT_OF_RANGE = 'KafkaJSOffsetOutOfRange';

export const kafkajsErrors: KafkaErrorClassifier = {
  isFenced: (error) => brokerError(error, 'type', FENCED) !== undefined,
  recordErrorType,
  isBrokerUnreachable,
  isOffsetOutOfRange: (error) => (error as { name?: unknown } | null)?.name === OFFSET_OUT_OF_RANGE,
  // kafkajs marks an error it gave up on non-retriable, also a broker that may be back for the next try.
  isPermanent: (error) =>
    !isBrokerUnreachable(error) && (error as { retriable?: unknown } | null)?.retriable === false,
};

/**
 * Runs `read` again, at most `retries` more times, while no broker answered: kafkajs itself gives up at once on
 * a request whose connection closed under it (a broker stopping), in its admin's offset calls and the cluster's
 * ListOffsets. Only for reads: a write sent again may be applied twice.
 */
export async function retryUnreachable<T>(retries: number, read: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (attempt >= retries || !isBrokerUnreachable(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, retryBackoffMs(attempt)));
    }
  }
}
