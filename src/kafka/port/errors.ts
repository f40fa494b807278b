/** What a client's errors mean: each implementation reads its own classes and codes, wrapped causes too. */
export interface KafkaErrorClassifier {
  /**
   * A newer producer of the same transactional id exists, or (with {@link KafkaClientCapabilities.fencesByGroup})
   * the group moved on to a newer generation: this producer's work must be dropped, never retried.
   */
  isFenced(error: unknown): boolean;
  /** The broker error that condemns a request's records rather than the request ({@link RECORD_ERRORS}). */
  recordErrorType(error: unknown): string | undefined;
  /** No broker could be reached (connection refused, no group coordinator found): it may pass once one is back. */
  isBrokerUnreachable(error: unknown): boolean;
  /** A fetch asked for an offset the partition no longer (or not yet) has. */
  isOffsetOutOfRange(error: unknown): boolean;
  /** Retrying the same request cannot help (a connection error is never permanent). */
  isPermanent(error: unknown): boolean;
}

/** Broker errors telling a transactional producer that a newer one of its transactional id exists. */
export const PRODUCER_FENCED_ERRORS = ['INVALID_PRODUCER_EPOCH', 'PRODUCER_FENCED'] as const;

/** Broker errors that condemn a request's records: no retry passes them, so the writer splits the request. */
export const RECORD_ERRORS: ReadonlySet<string> = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'INVALID_TIMESTAMP',
]);

const CONCURRENT_TRANSACTIONS = new Set(['CONCURRENT_TRANSACTIONS']);

/** The coordinator is still ending this producer's last transaction (for a few ms after every commit). */
export function isConcurrentTransactions(error: unknown, field: 'type' | 'apiId'): boolean {
  return brokerError(error, field, CONCURRENT_TRANSACTIONS) !== undefined;
}

/** Every error in the tree under `error` (`cause` chains and aggregated `errors`), at most 50 nodes. */
export function* errorTree(error: unknown): Generator<Record<string, unknown>> {
  const queue: unknown[] = [error];
  for (let seen = 0; queue.length > 0 && seen < 50; seen++) {
    const e = queue.shift();
    if (e === null || typeof e !== 'object') continue;
    const node = e as Record<string, unknown>;
    yield node;
    if (Array.isArray(node.errors)) queue.push(...node.errors);
    if (node.cause !== undefined) queue.push(node.cause);
  }
}

/** The first name in the tree that is in `names`, read from each error's `field` (a broker error's, or its class). */
export function brokerError(
  error: unknown,
  field: 'type' | 'apiId' | 'name',
  names: ReadonlySet<string>,
): string | undefined {
  for (const e of errorTree(error)) {
    const name = e[field];
    if (typeof name === 'string' && names.has(name)) return name;
  }
  return undefined;
}
