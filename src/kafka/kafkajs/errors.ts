import {
  brokerError,
  type KafkaErrorClassifier,
  PRODUCER_FENCED_ERRORS,
  RECORD_ERRORS,
  retryBackoffMs,
  retrying,
} from '../port/index.js';

// kafkajs raises a broker error as a KafkaJSProtocolError whose `type` is the broker's error name, often wrapped
// (a KafkaJSNonRetriableError, a retry's `cause`); its own failures are told apart by class name.

const FENCED = new Set<string>(PRODUCER_FENCED_ERRORS);
/** No broker answered; kafkajs gives up at once on these (every connection refused, one closed under a request). */
const UNREACHABLE = new Set([
  'KafkaJSGroupCoordinatorNotFound',
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSBrokerNotFound',
]);

export function isBrokerUnreachable(error: unknown): boolean {
  return brokerError(error, 'name', UNREACHABLE) !== undefined;
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
 * Runs `read` again, at most `retries` more times, while no broker answered or one answered retriably:
 * kafkajs gives up at once (admin offsets, the cluster's ListOffsets) on a connection closed under a request,
 * on NOT_LEADER_FOR_PARTITION or LEADER_NOT_AVAILABLE. `again`: a retry, whose caller refreshes its metadata
 * first. Only for reads: a write could apply twice.
 */
export function retryRead<T>(retries: number, read: (again: boolean) => Promise<T>): Promise<T> {
  let again = false;
  return retrying(
    () => read(again),
    (error, failures) => {
      // A broker's answer kafkajs marks retriable, as raised (not an error it already gave up retrying).
      const e = error as { name?: unknown; retriable?: unknown } | null;
      const retriable = e?.name === 'KafkaJSProtocolError' && e.retriable === true;
      if (failures > retries || !(isBrokerUnreachable(error) || retriable)) return undefined;
      again = true;
      return retryBackoffMs(failures - 1);
    },
  );
}
