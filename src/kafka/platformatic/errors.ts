import {
  brokerError,
  errorTree,
  type KafkaErrorClassifier,
  PRODUCER_FENCED_ERRORS,
  RECORD_ERRORS,
} from '../port/index.js';

// A broker error is a ProtocolError with its name as `apiId`; a partly failed request a ResponseError, a
// retried one a MultipleErrors of its attempts: the classifier walks the whole tree.

/** A transaction that can never commit: fenced by its id, or (KIP-447) by a group that moved on. */
const FENCED = new Set<string>([
  ...PRODUCER_FENCED_ERRORS,
  'ILLEGAL_GENERATION',
  'UNKNOWN_MEMBER_ID',
  'FENCED_INSTANCE_ID',
]);
/** The group coordinator is not reachable now (it may come back). */
const COORDINATOR_ERRORS = new Set([
  'COORDINATOR_NOT_AVAILABLE',
  'NOT_COORDINATOR',
  'COORDINATOR_LOAD_IN_PROGRESS',
]);
const NETWORK_CODES =
  /^(PLT_KFK_NETWORK|PLT_KFK_TIMEOUT|ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ETIMEDOUT|EPIPE)$/;

/** The name this implementation gives a fetch of an offset a partition no longer (or not yet) has. */
const OFFSET_OUT_OF_RANGE = 'OFFSET_OUT_OF_RANGE';

const NOT_OWNED = 'PartitionNotOwnedError';
const REBALANCING = 'GroupRebalancingError';

/** Raised by a transaction's `sendOffsets` for a partition this member does not own in its current generation. */
export class PartitionNotOwnedError extends Error {
  override readonly name = NOT_OWNED;
}

/**
 * A batch's heartbeat learned that the group rebalances or moved to a newer generation: the member rejoins and
 * goes on. Its cause may hold ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID, which are no fence here.
 */
export class GroupRebalancingError extends Error {
  override readonly name = REBALANCING;
}

/** True when the library's error (or one it holds) has `key` = `value` (its own `findBy`). */
export function findBy(error: unknown, key: string, value: unknown): boolean {
  return Boolean((error as { findBy?: (k: string, v: unknown) => unknown } | null)?.findBy?.(key, value));
}

/**
 * The library's outer messages say little ("Producing messages failed."): this error adds the broker's reasons
 * (`outer: APIID: broker message; ...`) and keeps the original as `cause`, for the classifier and dead letters.
 */
export function withBrokerDetail(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const reasons = new Set<string>();
  for (const e of errorTree(error)) {
    if (typeof e.apiId === 'string') reasons.add(`${e.apiId}: ${String(e.message ?? '')}`);
  }
  if (reasons.size === 0) return error;
  const wrapped = new Error(`${error.message.replace(/\.$/, '')}: ${[...reasons].join('; ')}`, {
    cause: error,
  });
  wrapped.name = error.name;
  return wrapped;
}

export function rethrowWithDetail(error: unknown): never {
  throw withBrokerDetail(error);
}

/**
 * A heartbeat meets the group's fencing errors in every rebalance (one sent with the old generation just after
 * the join completed is answered ILLEGAL_GENERATION), so a {@link GroupRebalancingError} is no fence.
 */
function isFenced(error: unknown): boolean {
  for (const e of errorTree(error)) {
    if (e.name === NOT_OWNED) return true;
    if (e.name === REBALANCING) return false;
  }
  return brokerError(error, 'apiId', FENCED) !== undefined;
}

export function isBrokerUnreachable(error: unknown): boolean {
  for (const e of errorTree(error)) {
    if (typeof e.code === 'string' && NETWORK_CODES.test(e.code)) return true;
    if (typeof e.apiId === 'string' && COORDINATOR_ERRORS.has(e.apiId)) return true;
  }
  return false;
}

export function isOffsetOutOfRange(error: unknown): boolean {
  for (const e of errorTree(error))
    if (e.apiId === OFFSET_OUT_OF_RANGE || e.name === OFFSET_OUT_OF_RANGE) return true;
  return false;
}

/** A broker error flagged `canRetry: false`, or a user error (bad options); never a connection error. */
export function isPermanent(error: unknown): boolean {
  if (isBrokerUnreachable(error)) return false;
  for (const e of errorTree(error)) {
    if (e.code === 'PLT_KFK_USER' || e.name === NOT_OWNED) return true;
    if (typeof e.apiId === 'string' && e.canRetry === false) return true;
  }
  return false;
}

export const platformaticErrors: KafkaErrorClassifier = {
  isFenced,
  recordErrorType: (error) => brokerError(error, 'apiId', RECORD_ERRORS),
  isBrokerUnreachable,
  isOffsetOutOfRange,
  isPermanent,
};
