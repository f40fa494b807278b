import { RepositoryError, SwallowedStatementError } from '../errors.js';
import type { RepositoryTransaction, TransactionalRepository, TransactionOptions } from '../store/types.js';
import { answerOne, type BatchEngine, type Finish, RunAgain, type Runner, toBatchResult } from './engine.js';
import type { ResolvedConsumerOptions } from './options.js';
import type {
  BatchHandler,
  BatchOptions,
  BatchResult,
  HandlerContext,
  MessageHandler,
  ProcessResult,
} from './types.js';

/** How many times a transaction runs when its lazy mark raced, or the database rolled it back on its own. */
const ATTEMPTS = 3;

/** What one transaction answered. */
interface Attempt<R> {
  readonly results: ProcessResult<R>[];
  readonly raced: boolean;
  readonly rolledBack: boolean;
}

/** The handlers' savepoints (`optimistic`: see `RepositoryTransaction.savepoint`; `none`: a failure rolls back all). */
type Savepoints = 'none' | 'optimistic' | 'real';

const OPTIMISTIC = { optimistic: true } as const;

/**
 * The consumer's `transaction` option: the engine's lookup, handlers and settle in one of the repository's
 * transactions, so the mark commits with the side effect (docs/transactions.md).
 */
export class TransactionRunner<M> implements Runner<M> {
  readonly #options: ResolvedConsumerOptions<M>;
  readonly #repository: TransactionalRepository;
  // biome-ignore lint/suspicious/noExplicitAny: the rule's per-batch state type is private to each rule.
  readonly #engine: BatchEngine<M, any>;
  readonly #perBatch: boolean;
  /** `removeOnFailure: false`: a failed handler's transaction commits its kept failure. */
  readonly #keepFailures: boolean;
  readonly #transactionOptions: TransactionOptions;

  // biome-ignore lint/suspicious/noExplicitAny: see #engine.
  constructor(options: ResolvedConsumerOptions<M>, engine: BatchEngine<M, any>) {
    this.#options = options;
    this.#repository = options.repository as TransactionalRepository;
    this.#engine = engine;
    this.#perBatch = options.transaction === 'batch';
    this.#keepFailures = !options.removeOnFailure;
    this.#transactionOptions = { lockTimeoutMs: options.lockTimeoutMs };
  }

  /** One message in its own transaction (`process`, `wrap`). */
  one<R>(message: M, handler: MessageHandler<M, R>, options: BatchOptions): Promise<ProcessResult<R>> {
    return this.#attempts([message], handler, options, answerOne);
  }

  /** `processBatch`: a transaction per message, in order, or one for the batch (`'batch'`, a whole-batch handler). */
  async batch<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions,
  ): Promise<BatchResult<R>> {
    if (this.#perBatch || typeof handler !== 'function' || messages.length <= 1) {
      return this.#attempts(messages, handler, options, toBatchResult);
    }
    const results: ProcessResult<R>[] = [];
    const { placeOf } = options;
    for (let i = 0; i < messages.length; i++) {
      // Its place is still its place in the caller's batch.
      const own = placeOf === undefined ? options : { ...options, placeOf: () => placeOf(i) };
      results.push(...(await this.#attempts([messages[i] as M], handler, own, ownResults)));
    }
    return { results };
  }

  /** Runs the transaction again while it must (see {@link ATTEMPTS}); answers `finish` of the last run's results. */
  async #attempts<R, T>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions,
    finish: Finish<M, R, T>,
  ): Promise<T> {
    // A savepoint per handler only where a failure must leave the rest of the transaction standing.
    let savepoints: Savepoints =
      typeof handler === 'function' && (this.#keepFailures || messages.length > 1) ? 'optimistic' : 'none';
    for (let attempt = 1; ; attempt++) {
      // The transaction it opened, kept for after `transaction()` settled (it may reject).
      const opened: { transaction?: RepositoryTransaction } = {};
      let outcome: Attempt<R> | undefined;
      let failure: unknown;
      try {
        outcome = await this.#transact(messages, handler, options, opened, savepoints);
      } catch (error) {
        failure = error;
      }
      if (savepoints === 'optimistic' && opened.transaction?.needsSavepoints === true) {
        // An optimistic savepoint could not stand in for a real one: once more with real ones, not counted.
        savepoints = 'real';
        attempt--;
        continue;
      }
      // Rolled back by the database, whether `transaction()` then rejected or resolved: nothing of it committed.
      const rolledBackBy = opened.transaction?.rolledBackBy;
      if (rolledBackBy !== undefined) {
        if (attempt < ATTEMPTS) continue;
        throw new RepositoryError(
          `the database rolled the transaction back ${ATTEMPTS} times in a row (${rolledBackBy}); nothing of ` +
            'it was committed',
          { cause: failure },
        );
      }
      if (outcome === undefined) throw failure;
      const { results, raced, rolledBack } = outcome;
      if (raced && attempt < ATTEMPTS) continue;
      return finish(rolledBack ? results.map(undone) : results, this.#options);
    }
  }

  #transact<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions,
    opened: { transaction?: RepositoryTransaction },
    savepoints: Savepoints,
  ): Promise<Attempt<R>> {
    return this.#repository.transaction(async (transaction) => {
      opened.transaction = transaction;
      const inTransaction =
        typeof handler === 'function'
          ? perMessage(handler, transaction, savepoints)
          : wholeBatch(handler, transaction);
      // A message alone takes the engine's recycled working state.
      const results =
        messages.length === 1 && typeof inTransaction === 'function'
          ? await this.#engine.single(messages[0] as M, inTransaction, options, ownResults)
          : (await this.#engine.batch(messages, inTransaction, options)).results;
      const raced = anyRaced(results);
      // Another transaction committed an id first: this one's effect for it must not commit.
      if (raced) transaction.rollbackOnly();
      return { results: results as ProcessResult<R>[], raced, rolledBack: transaction.rollingBack };
    }, this.#transactionOptions);
  }
}

/** True when a lazy mark of the batch raced (a loop, not a closure per transaction). */
function anyRaced(results: readonly ProcessResult[]): boolean {
  for (const r of results) if (r.raced === true) return true;
  return false;
}

/** The results of a recycled batch of one, in an array of their own (the engine's is reused). */
function ownResults<R>(results: ProcessResult<R>[]): ProcessResult<R>[] {
  return [results[0] as ProcessResult<R>];
}

function withTransaction(context: HandlerContext, transaction: RepositoryTransaction): HandlerContext {
  return { ...context, transaction: transaction.client };
}

/** A per-message handler in the transaction; its failure undoes its writes (to its savepoint, or all of them). */
function perMessage<M, R>(
  handler: MessageHandler<M, R>,
  transaction: RepositoryTransaction,
  savepoints: Savepoints,
): MessageHandler<M, R> {
  return (message, context) =>
    underSavepoint(transaction, savepoints, `the handler of message ${JSON.stringify(context.id)}`, () =>
      handler(message, withTransaction(context, transaction)),
    );
}

/** A whole-batch handler under a savepoint: a throw undoes its writes (items it answers failed keep theirs). */
function wholeBatch<M>(handler: BatchHandler<M>, transaction: RepositoryTransaction): BatchHandler<M> {
  return {
    batch: (items) => {
      const given = items.map((item) => ({ ...item, context: withTransaction(item.context, transaction) }));
      return underSavepoint(transaction, 'real', 'the whole-batch handler', () => handler.batch(given));
    },
  };
}

/** Runs `who`'s work under a savepoint (`none`: a failure rolls back the whole transaction). */
async function underSavepoint<T>(
  transaction: RepositoryTransaction,
  savepoints: Savepoints,
  who: string,
  work: () => Promise<T> | T,
): Promise<T> {
  if (savepoints !== 'none')
    await transaction.savepoint(savepoints === 'optimistic' ? OPTIMISTIC : undefined);
  let value: T;
  try {
    value = await work();
  } catch (error) {
    if (savepoints === 'none') transaction.rollbackOnly();
    else await transaction.rollbackToSavepoint();
    // It wrote before it failed, and no savepoint was set to undo that: the run ends here, and runs again.
    if (transaction.needsSavepoints === true) throw new RunAgain();
    throw error;
  }
  if (savepoints === 'none') return value;
  try {
    await transaction.releaseSavepoint();
  } catch (error) {
    // It swallowed a statement error (PostgreSQL): the store rolled it back to the savepoint, and it fails.
    if (!(error instanceof SwallowedStatementError)) throw error;
    throw new SwallowedStatementError(
      `${who} swallowed a statement error: a SQL statement it ran failed and it caught the error, which left the ` +
        'transaction aborted; its writes were rolled back to the savepoint set before it and it is failed. Let ' +
        "the error propagate, or run a statement that may fail under a savepoint of the handler's own",
      { cause: error },
    );
  }
  // It wrote, and left the transaction unsound (a statement error it caught): only a savepoint can single it out.
  if (transaction.needsSavepoints === true) throw new RunAgain();
  return value;
}

/** A result of a rolled-back transaction: a message it reported handled did not commit, so it is in-progress. */
function undone<R>(result: ProcessResult<R>): ProcessResult<R> {
  if (result.outcome !== 'processed' && result.raced !== true) return result;
  return { outcome: 'in-progress', id: result.id };
}
