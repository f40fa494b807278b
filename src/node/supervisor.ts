import type { Logger } from 'pino';
import type { GroupConsumer, KafkaErrorClassifier } from '../kafka/port/index.js';

/** Restarts of a consumer that crashed for lack of a broker, in a row (a join resets the count): ~5 minutes. */
const MAX_RESTARTS = 12;
const RESTART_FIRST_MS = 1_000;
const RESTART_MAX_MS = 30_000;

/**
 * Keeps the node's consumer running: the client restarts it after most crashes; after one it gives up on only for
 * lack of a broker, the supervisor starts it again (with backoff); any other crash fails the node (`failed`).
 */
export class ConsumerSupervisor {
  readonly #logger: Logger;
  readonly #errors: KafkaErrorClassifier;
  #run: (() => Promise<void>) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #restarts = 0;
  #stopped = false;
  #fail: (error: unknown) => void = () => undefined;
  /** Rejects when the consumer failed for good. Observed by whoever awaits it; never an unhandled rejection. */
  readonly failed: Promise<never>;

  constructor(consumer: GroupConsumer, errors: KafkaErrorClassifier, logger: Logger) {
    this.#logger = logger;
    this.#errors = errors;
    this.failed = new Promise<never>((_, reject) => {
      this.#fail = reject;
    });
    this.failed.catch(() => undefined);
    consumer.onCrash(({ error, restart }) => this.#crashed(error, restart));
  }

  async start(run: () => Promise<void>): Promise<void> {
    this.#run = run;
    await run();
  }

  /** The consumer joined the group: it works again, so the restart count starts over. */
  joined(): void {
    this.#restarts = 0;
  }

  /** No more restarts (the node is stopping). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  #crashed(error: Error, restart: boolean): void {
    const logger = this.#logger;
    if (restart) {
      logger.warn({ err: error }, 'consumer crashed; the client restarts it');
      return;
    }
    const run = this.#run;
    if (run && !this.#stopped && this.#errors.isBrokerUnreachable(error) && this.#restarts < MAX_RESTARTS) {
      // kafkajs treats "no broker answered the coordinator lookup" as final, although a broker restart (or a
      // leader moving) causes it: a single-broker cluster that restarts would otherwise end the process.
      const delay = Math.min(RESTART_MAX_MS, RESTART_FIRST_MS * 2 ** this.#restarts++);
      logger.warn(
        { err: error, attempt: this.#restarts, delayMs: delay },
        'consumer crashed for lack of a broker; the node starts it again',
      );
      this.#timer = setTimeout(() => {
        this.#timer = undefined;
        if (!this.#stopped) run().catch(this.#fail);
      }, delay);
      return;
    }
    logger.error({ err: error }, 'consumer crashed and will not restart');
    this.#fail(error);
  }
}
