import type { KafkaErrorClassifier } from '../port/index.js';

/*
 * What @platformatic/kafka's errors mean. A broker error is a ProtocolError whose `apiId` is the broker's error
 * name; a request that failed for some partitions is a ResponseError (an AggregateError of ProtocolErrors); every
 * retried operation ends as a MultipleErrors holding each attempt's error. So the classifier walks the whole
 * tree: `cause` chains and `errors` arrays.
 */

/**
 * Broker errors telling a transactional producer that it can never commit: a newer producer of its
 * transactional id exists, or (KIP-447) the group moved on to a generation this member is not part of.
 */
const FENCED_ERRORS = new Set([
  'INVALID_PRODUCER_EPOCH',
  'PRODUCER_FENCED',
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'FENCED_INSTANCE_ID',
]);

/** Broker errors that condemn the records of a request rather than the request: no retry can pass them. */
const RECORD_ERRORS = new Set([
  'MESSAGE_TOO_LARGE',
  'RECORD_LIST_TOO_LARGE',
  'INVALID_RECORD',
  'INVALID_TIMESTAMP',
]);

/** Broker errors saying the group coordinator is not reachable now (it may come back). */
const COORDINATOR_ERRORS = new Set([
  'COORDINATOR_NOT_AVAILABLE',
  'NOT_COORDINATOR',
  'COORDINATOR_LOAD_IN_PROGRESS',
]);

/** The coordinator is still ending the previous transaction of this producer (see isConcurrentTransactions). */
const CONCURRENT_TRANSACTIONS = new Set(['CONCURRENT_TRANSACTIONS']);

/** The name this implementation gives a fetch of an offset a partition no longer (or not yet) has. */
export const OFFSET_OUT_OF_RANGE = 'OFFSET_OUT_OF_RANGE';

/** The name of the error the port raises itself when the member no longer owns a partition it commits. */
export const NOT_OWNED = 'PartitionNotOwnedError';

/** Raised by a transaction's `sendOffsets` for a partition this member does not own in its current generation. */
export class PartitionNotOwnedError extends Error {
  override readonly name = NOT_OWNED;
}

/** The name of the error a batch's heartbeat rejects with when the group moves on (see isFenced). */
export const REBALANCING = 'GroupRebalancingError';

/**
 * A batch's heartbeat learned that the group rebalances or has moved to a newer generation: the member rejoins
 * and goes on. Its cause may hold ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, which are no fence here.
 */
export class GroupRebalancingError extends Error {
  override readonly name = REBALANCING;
}

/** Every error in the tree under `error` (causes and aggregated errors), at most 50 nodes. */
function* tree(error: unknown): Generator<Record<string, unknown>> {
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

/** The first broker error name (`apiId`) in the tree that is in `names`. */
function brokerError(error: unknown, names: ReadonlySet<string>): string | undefined {
  for (const e of tree(error)) {
    if (typeof e.apiId === 'string' && names.has(e.apiId)) return e.apiId;
  }
  return undefined;
}

/**
 * The library's outer messages say little ("Producing messages failed."); the broker's reasons are inside. This
 * error says both (`outer: APIID: broker message; ...`) and keeps the original as `cause`, so the classifier still
 * finds everything, and a dead letter's reason names what the broker said.
 */
export function withBrokerDetail(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const reasons = new Set<string>();
  for (const e of tree(error)) {
    if (typeof e.apiId === 'string') reasons.add(`${e.apiId}: ${String(e.message ?? '')}`);
  }
  if (reasons.size === 0) return error;
  const wrapped = new Error(`${error.message.replace(/\.$/, '')}: ${[...reasons].join('; ')}`, {
    cause: error,
  });
  wrapped.name = error.name;
  return wrapped;
}

/**
 * The transaction coordinator is still ending this producer's previous transaction (writing its markers): the
 * next transaction's first request is answered so for a few milliseconds after every commit.
 */
export function isConcurrentTransactions(error: unknown): boolean {
  return brokerError(error, CONCURRENT_TRANSACTIONS) !== undefined;
}

/**
 * True when this producer's transaction can never commit (fenced by its id or by the group). The group's errors
 * fence a transaction's offsets (KIP-447); a heartbeat gets the same ones in every rebalance: one sent with the
 * old generation after the coordinator completed the join, a few ms before this member hears of it, is answered
 * ILLEGAL_GENERATION, and the member is in the new generation all the same.
 */
export function isFenced(error: unknown): boolean {
  for (const e of tree(error)) {
    if (e.name === NOT_OWNED) return true;
    if (e.name === REBALANCING) return false;
  }
  return brokerError(error, FENCED_ERRORS) !== undefined;
}

/** The broker error that condemns the records (e.g. `MESSAGE_TOO_LARGE`). */
export function recordErrorType(error: unknown): string | undefined {
  return brokerError(error, RECORD_ERRORS);
}

/** No broker answered: connection refused or closed, a timeout, no coordinator available. */
export function isBrokerUnreachable(error: unknown): boolean {
  for (const e of tree(error)) {
    if (e.code === 'PLT_KFK_NETWORK' || e.code === 'PLT_KFK_TIMEOUT') return true;
    if (
      typeof e.code === 'string' &&
      /^(ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ETIMEDOUT|EPIPE)$/.test(e.code)
    ) {
      return true;
    }
    if (typeof e.apiId === 'string' && COORDINATOR_ERRORS.has(e.apiId)) return true;
  }
  return false;
}

/** A fetch or a list of offsets asked for an offset out of the partition's range. */
export function isOffsetOutOfRange(error: unknown): boolean {
  for (const e of tree(error))
    if (e.apiId === OFFSET_OUT_OF_RANGE || e.name === OFFSET_OUT_OF_RANGE) return true;
  return false;
}

/**
 * Retrying cannot help: a broker error flagged `canRetry: false`, or a user error (bad options); never a
 * connection error.
 */
export function isPermanent(error: unknown): boolean {
  if (isBrokerUnreachable(error)) return false;
  for (const e of tree(error)) {
    if (e.code === 'PLT_KFK_USER' || e.name === NOT_OWNED) return true;
    if (typeof e.apiId === 'string' && e.canRetry === false) return true;
  }
  return false;
}

/** The @platformatic/kafka errors, as the port classifies them. */
export const platformaticErrors: KafkaErrorClassifier = {
  isFenced,
  recordErrorType,
  isBrokerUnreachable,
  isOffsetOutOfRange,
  isPermanent,
};
