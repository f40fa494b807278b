import { RepositoryError, SwallowedStatementError } from '../errors.js';
import type { RepositoryTransaction, TransactionalRepository, TransactionOptions } from '../store/types.js';
import { answerOne, type BatchEngine, RunAgain, type Runner, toBatchResult } from './engine.js';
import type { ResolvedConsumerOptions } from './options.js';
import type {
  BatchHandler,
  BatchItem,
  BatchOptions,
  BatchResult,
  HandlerContext,
  MessageHandler,
  ProcessResult,
} from './types.js';

/**
 * How many times a transaction runs in all when it must run again:
 * - its lazy mark raced: another transaction committed the same id between this one's check and its mark. This
 *   one is rolled back (its effect with it) and runs again, and the run after sees the committed id as a
 *   duplicate. A mark that still races then answers in-progress.
 * - the database rolled it back whole on its own (`RepositoryTransaction.rolledBackBy`: a MySQL deadlock, also in
 *   a statement of a handler's own). Nothing of it committed; every message of it runs again. When the last run
 *   is rolled back too, the call rejects with a retryable RepositoryError, as on any store failure.
 */
const ATTEMPTS = 3;

/**
 * What one transaction answered: its results, whether a lazy mark raced, whether it was rolled back, and whether
 * an optimistic savepoint could not stand in for a real one (`needsSavepoints`: it runs again with real ones).
 */
interface Attempt<R> {
  readonly results: ProcessResult<R>[];
  readonly raced: boolean;
  readonly rolledBack: boolean;
  readonly needsSavepoints: boolean;
}

/**
 * The handlers' savepoints in one transaction: `optimistic`, none set where the store can do without (see
 * `RepositoryTransaction.savepoint`; a handler that throws before it sent a statement needs none, and one that
 * wrote and then threw makes the transaction run again with `real` ones), `real`, or `none` (a transaction of one
 * message whose failure is not kept: a failure rolls it back whole).
 */
type Savepoints = 'none' | 'optimistic' | 'real';

const OPTIMISTIC = { optimistic: true } as const;

/** The transaction an attempt opened, kept for after `transaction()` settled (it may reject). */
interface Opened {
  transaction?: RepositoryTransaction;
}

/**
 * The consumer's `transaction` option: runs the batch engine inside the repository's transactions, so the mark
 * commits in the side effect's own transaction.
 *
 * In one transaction: the engine's lookup (the claim, or the lazy check), the handlers (each given the
 * transaction's connection as `context.transaction`), then the settle (confirm, release or mark), then one
 * commit. A concurrent claim of an id this transaction holds waits on its row lock, and after the lock timeout
 * the store answers it in-progress. A handler that throws rolls back its own writes with its claim: under a
 * savepoint when the transaction holds more than that message or keeps the failure, else by rolling the whole
 * transaction back (one round trip less on the common path). A crash commits nothing, and neither does a
 * transaction the database rolled back on its own: it runs again (see {@link ATTEMPTS}).
 */
export class TransactionRunner<M> implements Runner<M> {
  readonly #options: ResolvedConsumerOptions<M>;
  readonly #repository: TransactionalRepository;
  // biome-ignore lint/suspicious/noExplicitAny: the rule's per-batch state type is private to each rule.
  readonly #engine: BatchEngine<M, any>;
  readonly #perBatch: boolean;
  /** A failed handler's failure is kept with its id (`removeOnFailure: false`): its transaction commits. */
  readonly #keepFailures: boolean;
  /** Every transaction's options: one object, not one per message. */
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

  /**
   * `processBatch`: one transaction per message, in order, or one for the whole batch (`transaction: 'batch'`,
   * or a whole-batch handler, which writes every message's effect in one call).
   */
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
      // Each message is a batch of one here: its place is still its place in the caller's batch.
      const own = placeOf === undefined ? options : { ...options, placeOf: () => placeOf(i) };
      results.push(await this.#attempts([messages[i] as M], handler, own, firstResult));
    }
    return { results };
  }

  /**
   * Runs the transaction again while a lazy mark raced or the database rolled it back (see {@link ATTEMPTS});
   * answers `finish` of the last run's results (a shared function, not a closure per call).
   */
  async #attempts<R, T>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions,
    finish: (results: ProcessResult<R>[], options: ResolvedConsumerOptions<M>) => T,
  ): Promise<T> {
    // A savepoint per handler only where a failure must leave the rest of the transaction standing.
    let savepoints: Savepoints =
      typeof handler === 'function' && (this.#keepFailures || messages.length > 1) ? 'optimistic' : 'none';
    for (let attempt = 1; ; attempt++) {
      const opened: Opened = {};
      let outcome: Attempt<R> | undefined;
      let failure: unknown;
      try {
        outcome = await this.#transact(messages, handler, options, opened, savepoints);
      } catch (error) {
        failure = error;
      }
      if (savepoints === 'optimistic' && opened.transaction?.needsSavepoints === true) {
        // Rolled back, nothing of it committed: once more, every handler, with real savepoints; not counted as an
        // attempt.
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

  /** One transaction over the engine; see the class comment. */
  #transact<R>(
    messages: readonly M[],
    handler: MessageHandler<M, R> | BatchHandler<M>,
    options: BatchOptions,
    opened: Opened,
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
      return {
        results: results as ProcessResult<R>[],
        raced,
        rolledBack: transaction.rollingBack,
        needsSavepoints: transaction.needsSavepoints === true,
      };
    }, this.#transactionOptions);
  }
}

/** True when a lazy mark of the batch raced (a loop, not a closure per transaction). */
function anyRaced(results: readonly ProcessResult[]): boolean {
  for (const r of results) if (r.raced === true) return true;
  return false;
}

/** The results of a recycled batch of one, in an array of their own (the engine's is cleared for reuse). */
function ownResults<R>(results: ProcessResult<R>[]): ProcessResult<R>[] {
  return [results[0] as ProcessResult<R>];
}

function firstResult<R>(results: ProcessResult<R>[]): ProcessResult<R> {
  return results[0] as ProcessResult<R>;
}

/** The handler's context with the open transaction's connection. */
function withTransaction(context: HandlerContext, transaction: RepositoryTransaction): HandlerContext {
  return { ...context, transaction: transaction.client };
}

/**
 * A per-message handler run in the transaction. Its failure undoes its own writes: back to its savepoint, or
 * (a transaction of this message alone, nothing kept) by making the transaction roll back.
 */
function perMessage<M, R>(
  handler: MessageHandler<M, R>,
  transaction: RepositoryTransaction,
  savepoints: Savepoints,
): MessageHandler<M, R> {
  if (savepoints === 'none') {
    return async (message, context) => {
      try {
        return await handler(message, withTransaction(context, transaction));
      } catch (error) {
        transaction.rollbackOnly();
        throw error;
      }
    };
  }
  const how = savepoints === 'optimistic' ? OPTIMISTIC : undefined;
  return async (message, context) => {
    await transaction.savepoint(how);
    let value: R;
    try {
      value = await handler(message, withTransaction(context, transaction));
    } catch (error) {
      await transaction.rollbackToSavepoint();
      // It wrote before it failed, and no savepoint was set to undo that: the run ends here, and runs again.
      if (transaction.needsSavepoints === true) throw new RunAgain();
      throw error;
    }
    await keepWrites(transaction, `the handler of message ${JSON.stringify(context.id)}`);
    // It wrote, and left the transaction unsound (a statement error it caught): only a savepoint can single it out.
    if (transaction.needsSavepoints === true) throw new RunAgain();
    return value;
  };
}

/**
 * Releases the savepoint of a handler that returned. When the handler had caught the error of a statement that
 * left the transaction unusable (PostgreSQL), the store rolled back to the savepoint instead: the handler's
 * writes are undone, so its message fails (and the rest of the transaction goes on) with an error saying why.
 */
async function keepWrites(transaction: RepositoryTransaction, who: string): Promise<void> {
  try {
    await transaction.releaseSavepoint();
  } catch (error) {
    if (!(error instanceof SwallowedStatementError)) throw error;
    throw new SwallowedStatementError(
      `${who} swallowed a statement error: a SQL statement it ran failed and it caught the error, which left the ` +
        'transaction aborted; its writes were rolled back to the savepoint set before it and it is failed. Let ' +
        "the error propagate, or run a statement that may fail under a savepoint of the handler's own",
      { cause: error },
    );
  }
}

/**
 * A whole-batch handler run in the transaction, under a savepoint: when it throws, every message failed and its
 * writes are undone. Items it answers as failed keep whatever it wrote for them: in a transaction, a handler
 * that reports single items failed must not have written their effects (or undo them with its own savepoints).
 */
function wholeBatch<M>(handler: BatchHandler<M>, transaction: RepositoryTransaction): BatchHandler<M> {
  return {
    batch: async (items) => {
      const given: BatchItem<M>[] = items.map((item) => ({
        ...item,
        context: withTransaction(item.context, transaction),
      }));
      await transaction.savepoint();
      let reply: Awaited<ReturnType<BatchHandler<M>['batch']>>;
      try {
        reply = await handler.batch(given);
      } catch (error) {
        await transaction.rollbackToSavepoint();
        throw error;
      }
      await keepWrites(transaction, 'the whole-batch handler');
      return reply;
    },
  };
}

/**
 * A result of a transaction that was rolled back (a busy claim, a mark that still raced, a failed handler): a
 * message it reported handled did not commit, so it is in-progress (another worker holds or just committed its
 * id; a redelivery decides it again), never `processed`.
 */
function undone<R>(result: ProcessResult<R>): ProcessResult<R> {
  if (result.outcome !== 'processed' && result.raced !== true) return result;
  return { outcome: 'in-progress', id: result.id };
}
