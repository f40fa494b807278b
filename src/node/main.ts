import { type DestinationStream, type Logger, pino } from 'pino';
import { loadConfig } from '../config/load.js';
import { logRedactPaths, REDACTED } from '../config/redact.js';
import { openRepository } from '../config/repository.js';
import { ConfigError } from '../errors.js';
import type { IdempotentRepository } from '../repositories/types.js';
import { type DedupNodeHandle, startDedupNode } from './dedup-node.js';
import { type NodeConfig, nodeConfigSchema } from './options.js';

/** Exit codes of {@link runNode}. */
export const nodeExitCodes = {
  /** Stopped by SIGTERM/SIGINT after finishing its batch and committing. */
  ok: 0,
  /** Failed while running (the consumer gave up), or the graceful stop overran `shutdown.timeout`. */
  failed: 1,
  /** The config is invalid; one line on stderr says which key. */
  config: 2,
  /** Could not start: the store or the brokers did not answer. */
  startup: 3,
} as const;

/** Options of {@link runNode}. */
export interface RunNodeOptions {
  /** TOML config file; falls back to `IDEM_CONFIG`. */
  readonly configPath?: string;
  /** Environment for `IDEM__SECTION__KEY` overrides (default `process.env`). */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * `idem node --config node.toml`: runs the dedup node until SIGTERM or SIGINT, then finishes the chunk in hand,
 * commits, flushes the store and resolves to 0. A second signal during the stop gives up at once (code 1).
 * Resolves to one of {@link nodeExitCodes}; the caller exits with it.
 */
export async function runNode(options: RunNodeOptions = {}): Promise<number> {
  const logger = nodeLogger(pino.destination({ fd: 1, sync: false }));
  try {
    return await run(options, logger);
  } finally {
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
  }
}

/** The node's JSON logger. Secrets (SASL, passwords, TLS keys) never reach it, whatever object carries them. */
export function nodeLogger(destination: DestinationStream): Logger {
  return pino({ name: 'idem-node', redact: { paths: [...logRedactPaths], censor: REDACTED } }, destination);
}

async function run(options: RunNodeOptions, logger: Logger): Promise<number> {
  let config: NodeConfig;
  let repository: IdempotentRepository;
  try {
    config = await loadConfig(nodeConfigSchema, {
      ...(options.configPath ? { path: options.configPath } : {}),
      ...(options.env ? { env: options.env } : {}),
    });
    repository = await openRepository(config, { onWarning: (warning) => logger.warn(warning) });
  } catch (error) {
    if (!(error instanceof ConfigError)) {
      logger.error({ err: error }, 'cannot open the repository');
      return nodeExitCodes.startup;
    }
    process.stderr.write(`idem node: ${error.message}\n`);
    return nodeExitCodes.config;
  }

  // Listen before starting, so a signal during the start still stops the node cleanly once it runs.
  const signals = new SignalWatch();
  let node: DedupNodeHandle;
  try {
    node = await startDedupNode(config, repository, logger);
  } catch (error) {
    signals.dispose();
    await repository.close().catch(() => undefined);
    logger.error({ err: error }, 'dedup node failed to start');
    if (error instanceof ConfigError) process.stderr.write(`idem node: ${error.message}\n`);
    return error instanceof ConfigError ? nodeExitCodes.config : nodeExitCodes.startup;
  }
  logger.info(
    {
      input: config.input.topic,
      groupId: config.input.groupId,
      output: config.output.topic,
      dlq: config.dlq.topic,
      repository: config.repository.type,
      metricsPort: node.metricsPort,
      ...(node.metricsPort === undefined ? {} : { metricsHost: config.metrics.host }),
    },
    'dedup node running',
  );

  const outcome = await Promise.race([
    signals.next().then((signal) => ({ signal })),
    node.failed.catch((error: unknown) => ({ error })),
  ]);
  if ('error' in outcome) {
    await stopWithin(node, config.shutdown.timeout, logger);
    signals.dispose();
    return nodeExitCodes.failed;
  }

  logger.info({ signal: outcome.signal }, 'stopping: finishing the chunk in hand');
  const stopped = await Promise.race([
    stopWithin(node, config.shutdown.timeout, logger),
    signals.next().then(() => 'interrupted' as const),
  ]);
  signals.dispose();
  if (stopped !== 'stopped') {
    if (stopped === 'interrupted') logger.error('second signal: exiting without finishing the stop');
    if (stopped === 'timeout') logger.error({ timeoutMs: config.shutdown.timeout }, 'the stop overran');
    return nodeExitCodes.failed;
  }
  logger.info({ totals: node.totals() }, 'stopped cleanly');
  return nodeExitCodes.ok;
}

/** SIGTERM/SIGINT as promises; handlers stay installed so a signal never kills the process by default. */
class SignalWatch {
  readonly #queue: NodeJS.Signals[] = [];
  #waiter: ((signal: NodeJS.Signals) => void) | undefined;
  readonly #handler = (signal: NodeJS.Signals) => {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    if (waiter) waiter(signal);
    else this.#queue.push(signal);
  };

  constructor() {
    process.on('SIGTERM', this.#handler);
    process.on('SIGINT', this.#handler);
  }

  /** The next signal received (or one already queued). */
  next(): Promise<NodeJS.Signals> {
    const queued = this.#queue.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve) => {
      this.#waiter = resolve;
    });
  }

  dispose(): void {
    process.off('SIGTERM', this.#handler);
    process.off('SIGINT', this.#handler);
  }
}

/** Resolves to `'stopped'`, or to `'timeout'` when the stop overruns `ms` (its error, if any, is logged). */
function stopWithin(
  node: DedupNodeHandle,
  ms: number,
  logger: Logger,
): Promise<'stopped' | 'timeout' | 'failed'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  const stop = node.stop().then(
    () => 'stopped' as const,
    (error: unknown) => {
      logger.error({ err: error }, 'graceful stop failed');
      return 'failed' as const;
    },
  );
  return Promise.race([stop, timeout]).finally(() => clearTimeout(timer));
}
