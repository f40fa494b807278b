/**
 * What a client's errors mean to the callers of the port: each implementation recognises its own error classes
 * and broker error codes (wrapped causes included), so no caller tests a client's error names.
 */
export interface KafkaErrorClassifier {
  /**
   * A newer producer of the same transactional id exists, or (with {@link KafkaClientCapabilities.fencesByGroup})
   * the group moved on to a newer generation: this producer's work must be dropped, never retried.
   */
  isFenced(error: unknown): boolean;
  /**
   * The broker error that condemns the records of a request rather than the request (`MESSAGE_TOO_LARGE`,
   * `RECORD_LIST_TOO_LARGE`, `INVALID_RECORD`, `INVALID_TIMESTAMP`): no retry can pass it. Undefined otherwise.
   */
  recordErrorType(error: unknown): string | undefined;
  /** No broker could be reached (connection refused, no group coordinator found): it may pass once one is back. */
  isBrokerUnreachable(error: unknown): boolean;
  /** A fetch asked for an offset the partition no longer (or not yet) has. */
  isOffsetOutOfRange(error: unknown): boolean;
  /** Retrying the same request cannot help (a connection error is never permanent). */
  isPermanent(error: unknown): boolean;
}
