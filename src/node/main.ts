import { once } from 'node:events';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type DestinationStream, type Logger, pino } from 'pino';
import { loadConfig } from '../config/load.js';
import { openRepository } from '../config/repository.js';
import { ConfigError, MissingDependencyError, StartupTimeoutError } from '../errors.js';
import { loadKafkaClientFactory } from '../kafka/port/index.js';
import { logRedactPaths } from '../options/redact.js';
import { commandLine } from '../util/command-line.js';
import { asMissingDependency } from '../util/optional-module.js';
import { REDACTED } from '../util/redact-text.js';
import { type NodeConfig, nodeConfigSchema } from './options.js';

export const nodeExitCodes = {
  /** Stopped by SIGTERM/SIGINT after finishing its batch and committing. */
  ok: 0,
  /** Failed while running (the consumer gave up), or the graceful stop overran `shutdown.timeout`. */
  failed: 1,
  /** The config is invalid; one line on stderr says which key. */
  config: 2,
  /** Could not start: a package is missing (one line on stderr), or the store or the brokers did not answer. */
  startup: 3,
} as const;

export interface RunNodeOptions {
  /** TOML config file; falls back to `IDEM_CONFIG`. */
  readonly configPath?: string;
}

/**
 * `idem node --config node.toml`: runs the dedup node until SIGTERM or SIGINT, then finishes the chunk in hand,
 * commits, flushes the store and resolves to 0 ({@link nodeExitCodes}). A second signal gives up at once (1).
 */
export async function runNode(options: RunNodeOptions = {}): Promise<number> {
  const logger = nodeLogger(pino.destination({ fd: 1, sync: false }));
  // Listen from the first moment: a stop must not wait for the first connection's retries. The first SIGTERM or
  // SIGINT asks for the stop, the second gives up on it; while installed, a signal never kills the process.
  const signals: Signals = { stop: new AbortController(), interrupt: new AbortController() };
  const onSignal = (signal: NodeJS.Signals) =>
    (signals.stop.signal.aborted ? signals.interrupt : signals.stop).abort(signal);
  process.on('SIGTERM', onSignal).on('SIGINT', onSignal);
  try {
    return await run(options, logger, signals);
  } finally {
    process.off('SIGTERM', onSignal).off('SIGINT', onSignal);
    await new Promise<void>((resolve) => logger.flush(() => resolve()));
  }
}

/** The node's JSON logger. Secrets (SASL, passwords, TLS keys) never reach it, whatever object carries them. */
export function nodeLogger(destination: DestinationStream): Logger {
  return pino({ name: 'idem-node', redact: { paths: [...logRedactPaths], censor: REDACTED } }, destination);
}

async function run(options: RunNodeOptions, logger: Logger, signals: Signals): Promise<number> {
  let config: NodeConfig;
  try {
    config = await loadConfig(nodeConfigSchema, { path: options.configPath || undefined });
  } catch (error) {
    return startFailure(noConfigGiven(error, options) ?? error, logger, 'cannot read the config');
  }

  // The node's code and its Kafka client, imported on demand: a missing optional package is a sentence naming the fix.
  let startDedupNode: typeof import('./dedup-node.js').startDedupNode;
  try {
    ({ startDedupNode } = await import('./dedup-node.js'));
    await loadKafkaClientFactory(config.kafka.client, { configKey: 'kafka.client', feature: 'idem node' });
  } catch (error) {
    const missing = asMissingDependency(error, { feature: 'idem node' });
    return startFailure(missing ?? error, logger, 'cannot load the dedup node');
  }

  const opening = openRepository(config, { onWarning: (warning) => logger.warn(warning) });
  const opened = await orSignal(opening, signals);
  if ('signal' in opened) {
    logger.info(
      { signal: opened.signal },
      'stop requested while opening the repository: exiting without starting',
    );
    opening.then((repository) => repository.close()).catch(() => undefined);
    return nodeExitCodes.ok;
  }
  if ('error' in opened) return startFailure(opened.error, logger, 'cannot open the repository');
  const repository = opened.value;

  const abort = new AbortController();
  const starting = startDedupNode(config, repository, logger, { signal: abort.signal });
  const started = await orSignal(starting, signals);
  if ('signal' in started) {
    logger.info(
      { signal: started.signal, timeoutMs: config.shutdown.timeout },
      'stop requested during start-up: giving up the connection attempts',
    );
    abort.abort(new Error('stop requested during start-up'));
    // The start may have finished at that moment: then its node is stopped like a running one.
    const cleanup = starting.then(
      (node) => node.stop(),
      () => repository.close(),
    );
    const stopped = await settleWithin(cleanup, config.shutdown.timeout, signals.interrupt, logger);
    if (stopped !== 'stopped') return nodeExitCodes.failed;
    logger.info('stopped before the node started');
    return nodeExitCodes.ok;
  }
  if ('error' in started) {
    await repository.close().catch(() => undefined);
    logger.error({ err: started.error }, 'dedup node failed to start');
    if (started.error instanceof ConfigError || started.error instanceof StartupTimeoutError) {
      process.stderr.write(`${commandLine('idem node', started.error.message)}\n`);
    }
    return started.error instanceof ConfigError ? nodeExitCodes.config : nodeExitCodes.startup;
  }
  const node = started.value;
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

  const outcome = await orSignal(node.failed, signals);
  if (!('signal' in outcome)) {
    await settleWithin(node.stop(), config.shutdown.timeout, undefined, logger);
    return nodeExitCodes.failed;
  }

  logger.info({ signal: outcome.signal }, 'stopping: finishing the chunk in hand');
  const stopped = await settleWithin(node.stop(), config.shutdown.timeout, signals.interrupt, logger);
  if (stopped !== 'stopped') return nodeExitCodes.failed;
  logger.info({ totals: node.totals() }, 'stopped cleanly');
  return nodeExitCodes.ok;
}

/** No config given: says so, and how to write one, rather than listing every required key as a problem. */
function noConfigGiven(error: unknown, options: RunNodeOptions): ConfigError | undefined {
  if (!(error instanceof ConfigError) || options.configPath || process.env.IDEM_CONFIG) return undefined;
  const file = fileURLToPath(new URL('../../examples/node.toml', import.meta.url));
  const example = relative(process.cwd(), file).startsWith('..') ? file : relative(process.cwd(), file);
  const fromEnv = Object.keys(process.env).some((key) => key.startsWith('IDEM__'));
  return new ConfigError(
    'config',
    `pass --config node.toml or set IDEM_CONFIG; ${example} is a commented example ` +
      '(kafka.brokers, input.topic, output.topic, dlq.topic and dedup.id are required; docs/node.md has every key)' +
      (fromEnv ? `; the IDEM__ variables alone leave: ${error.message}` : ''),
    { label: 'no config given' },
  );
}

/** The exit code of a failed start: a config problem or a missing package is one line on stderr, else a log entry. */
function startFailure(error: unknown, logger: Logger, what: string): number {
  if (error instanceof ConfigError || error instanceof MissingDependencyError) {
    process.stderr.write(`${commandLine('idem node', error.message)}\n`);
    return error instanceof ConfigError ? nodeExitCodes.config : nodeExitCodes.startup;
  }
  logger.error({ err: error }, what);
  return nodeExitCodes.startup;
}

/** A start step's value or error, or the stop signal that arrived first. */
async function orSignal<T>(
  step: Promise<T>,
  signals: Signals,
): Promise<{ value: T } | { error: unknown } | { signal: NodeJS.Signals }> {
  return Promise.race([
    step.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    ),
    signalled(signals.stop).then((signal) => ({ signal })),
  ]);
}

/** The first SIGTERM/SIGINT aborts `stop`, the second `interrupt`. */
type Signals = Readonly<Record<'stop' | 'interrupt', AbortController>>;

/** The signal that aborted `controller`, once it has. */
function signalled({ signal }: AbortController): Promise<NodeJS.Signals> {
  return signal.aborted ? Promise.resolve(signal.reason) : once(signal, 'abort').then(() => signal.reason);
}

/** Waits for a stop for at most `ms`, or until a second signal; logs what cut it short, or its error. */
async function settleWithin(
  work: Promise<unknown>,
  ms: number,
  interrupt: AbortController | undefined,
  logger: Logger,
): Promise<'stopped' | 'timeout' | 'interrupted' | 'failed'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), ms);
  });
  const stop = work.then(
    () => 'stopped' as const,
    (error: unknown) => {
      logger.error({ err: error }, 'graceful stop failed');
      return 'failed' as const;
    },
  );
  const interrupted = interrupt ? [signalled(interrupt).then(() => 'interrupted' as const)] : [];
  const result = await Promise.race([stop, timeout, ...interrupted]).finally(() => clearTimeout(timer));
  if (result === 'interrupted') logger.error('second signal: exiting without finishing the stop');
  if (result === 'timeout') logger.error({ timeoutMs: ms }, 'the stop overran shutdown.timeout');
  return result;
}
