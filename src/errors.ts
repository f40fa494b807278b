/** One error family: each has a stable `code`, keeps its `cause`, and says whether a retry can succeed. */
export const ErrorCodes = {
  config: 'IDEM_ERR_CONFIG',
  invalidId: 'IDEM_ERR_INVALID_ID',
  noMessageId: 'IDEM_ERR_NO_MESSAGE_ID',
  inProgress: 'IDEM_ERR_IN_PROGRESS',
  repository: 'IDEM_ERR_REPOSITORY',
  repositoryClosed: 'IDEM_ERR_REPOSITORY_CLOSED',
  invalidInput: 'IDEM_ERR_INVALID_INPUT',
  output: 'IDEM_ERR_OUTPUT',
  claimLost: 'IDEM_ERR_CLAIM_LOST',
  conflict: 'IDEM_ERR_CONFLICT',
  storedFailure: 'IDEM_ERR_STORED_FAILURE',
  storedOutcome: 'IDEM_ERR_STORED_OUTCOME',
  missingDependency: 'IDEM_ERR_MISSING_DEPENDENCY',
  startupTimeout: 'IDEM_ERR_STARTUP_TIMEOUT',
  swallowedStatement: 'IDEM_ERR_SWALLOWED_STATEMENT',
} as const;

/** A stable code identifying the kind of failure. */
export type ErrorCode = (typeof ErrorCodes)[keyof typeof ErrorCodes];

/** Base class of every error this library throws on purpose. */
export class IdempotencyError extends Error {
  readonly code: ErrorCode;
  /** True when the same call may succeed if tried again later. */
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; retryable?: boolean } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options.retryable ?? false;
  }
}

/**
 * Invalid configuration; `key` is the setting's dotted path. The message reads `<source>: <key>: <problem>`,
 * or `<label>: <problem>` when a label names the setting (`option ttlMs of new IdempotentConsumer(...)`).
 */
export class ConfigError extends IdempotencyError {
  static readonly code = ErrorCodes.config;
  constructor(
    readonly key: string,
    message: string,
    options: { cause?: unknown; source?: string; label?: string } = {},
  ) {
    const where = options.label ?? `${options.source ? `${options.source}: ` : ''}${key}`;
    super(ConfigError.code, `${where}: ${message}`, options);
  }
}

/** An id that no repository can store: empty, too long, or of an unsupported type. */
export class InvalidIdError extends IdempotencyError {
  static readonly code = ErrorCodes.invalidId;
  constructor(message: string) {
    super(InvalidIdError.code, message);
  }
}

/** Raised by the consumer when a message has no id and the null-id policy is `reject` (Camel's NoMessageIdException). */
export class NoMessageIdError extends IdempotencyError {
  static readonly code = ErrorCodes.noMessageId;
  constructor(message = 'message has no id') {
    super(NoMessageIdError.code, message);
  }
}

/** Another worker holds a live claim on this id; retry after its lease. */
export class InProgressError extends IdempotencyError {
  static readonly code = ErrorCodes.inProgress;
  constructor(
    readonly id: string,
    readonly leaseExpiresAt: number | undefined,
  ) {
    super(InProgressError.code, `message ${JSON.stringify(id)} is being processed by another worker`, {
      retryable: true,
    });
  }
}

/** The store failed (I/O, network, timeout). The cause is the store client's own error. */
export class RepositoryError extends IdempotencyError {
  static readonly code = ErrorCodes.repository;
  constructor(message: string, options: { cause?: unknown; retryable?: boolean } = {}) {
    super(RepositoryError.code, message, { retryable: true, ...options });
  }
}

/** The repository cannot renew a lease at all: the consumer warns once and its claims hold for one lease. */
export class RenewUnsupportedError extends RepositoryError {
  constructor(message: string) {
    super(message, { retryable: false });
  }
}

/** An operation was called on a repository after `close()`. */
export class RepositoryClosedError extends IdempotencyError {
  static readonly code = ErrorCodes.repositoryClosed;
  constructor(name: string) {
    super(RepositoryClosedError.code, `${name} repository is closed`);
  }
}

/**
 * A confirm found its claim taken over (the lease ran out before the handler finished): the effect may happen
 * twice. Raised only under `lostClaim: 'error'`; by default the result reports it.
 */
export class ClaimLostError extends IdempotencyError {
  static readonly code = ErrorCodes.claimLost;
  constructor(
    readonly id: string,
    options: { cause?: unknown } = {},
  ) {
    super(
      ClaimLostError.code,
      `the claim on message ${JSON.stringify(id)} was lost: its lease ran out before the handler finished and ` +
        'another worker took the id over, so the message may be handled twice (the lease was not renewed: ' +
        'see stats.leaseRenewalFailures and the IDEM_LEASE_RENEWAL_* warnings; a handler that blocks the ' +
        'event loop also stops renewals)',
      { ...options, retryable: false },
    );
  }
}

/** An id reused with another payload `fingerprint`: `expected` is the stored digest, `actual` the new one. */
export class IdempotencyConflictError extends IdempotencyError {
  static readonly code = ErrorCodes.conflict;
  constructor(
    readonly id: string,
    readonly expected: string,
    readonly actual: string,
  ) {
    super(
      IdempotencyConflictError.code,
      `message ${JSON.stringify(id)} reuses an id with a different payload (fingerprint ${actual}, stored ${expected})`,
    );
  }
}

/**
 * A duplicate's replay of the failure kept with its id (`removeOnFailure: false`). `name` and `message` are
 * the original error's; `storedName` keeps the name too, since `name` is what users match on.
 */
export class StoredFailureError extends IdempotencyError {
  static readonly code = ErrorCodes.storedFailure;
  constructor(
    readonly id: string,
    readonly storedName: string,
    message: string,
  ) {
    super(StoredFailureError.code, message);
    this.name = storedName;
  }
}

/** A kept outcome `encryption` cannot read: the duplicate fails closed (no handler, nothing replayed). */
export class StoredOutcomeError extends IdempotencyError {
  static readonly code = ErrorCodes.storedOutcome;
  constructor(
    readonly id: string,
    readonly reason: string,
  ) {
    super(StoredOutcomeError.code, `the outcome kept for id ${JSON.stringify(id)} cannot be read: ${reason}`);
  }
}

/**
 * A handler caught a failed SQL statement and went on, which aborts the transaction (PostgreSQL's 25P02): its
 * writes are rolled back to its savepoint and it fails. `cause` is the error the store met.
 */
export class SwallowedStatementError extends IdempotencyError {
  static readonly code = ErrorCodes.swallowedStatement;
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(SwallowedStatementError.code, message, options);
  }
}

/** Input that cannot be processed (malformed line, missing field); `location` names file and line. */
export class InvalidInputError extends IdempotencyError {
  static readonly code = ErrorCodes.invalidInput;
  constructor(
    readonly location: string,
    readonly reason: string,
  ) {
    super(InvalidInputError.code, `${location}: ${reason}`);
  }
}

/** Writing output failed or was cut short (full disk, closed pipe); `cause` is the system error if there is one. */
export class OutputError extends IdempotencyError {
  static readonly code = ErrorCodes.output;
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(OutputError.code, message, options);
  }
}

/** An optional npm package a feature needs is not installed; `cause` is the loader's own error. */
export class MissingDependencyError extends IdempotencyError {
  static readonly code = ErrorCodes.missingDependency;
  /** The command that installs the package, e.g. `npm install kafkajs`. */
  readonly install: string;
  constructor(
    readonly packageName: string,
    readonly feature: string,
    options: { cause?: unknown; install?: string } = {},
  ) {
    const install = options.install ?? `npm install ${packageName}`;
    super(
      MissingDependencyError.code,
      `${feature} needs the npm package "${packageName}", which is not installed: ${install}`,
      options.cause === undefined ? {} : { cause: options.cause },
    );
    this.install = install;
  }
}

/** The message of an error of unknown type, for wrapping it in one of ours. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Wraps an unknown thrown value from a store client into a RepositoryError, leaving our own errors as they are. */
export function toRepositoryError(operation: string, error: unknown): IdempotencyError {
  if (error instanceof IdempotencyError) return error;
  return new RepositoryError(`${operation} failed: ${errorMessage(error)}`, { cause: error });
}

/** The dedup node's brokers did not answer within `kafka.startupTimeout`; names the last error seen. */
export class StartupTimeoutError extends IdempotencyError {
  static readonly code = ErrorCodes.startupTimeout;
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(StartupTimeoutError.code, message, { ...options, retryable: true });
  }
}
