import { pino } from 'pino';
import { loadConfig } from '../config/load.js';
import { openRepository } from '../config/repository.js';
import { IdempotencyError } from '../errors.js';
import { startDedupNode } from './dedup-node.js';
import { nodeConfigSchema } from './options.js';

/**
 * `idem node --config node.toml`: runs the dedup node until SIGTERM or SIGINT, then finishes the batch in hand,
 * commits it, flushes the store and resolves to exit code 0. Config problems resolve to 2 after one clear line.
 */
export async function runNode(options: { configPath?: string }): Promise<number> {
  const logger = pino({ name: 'idem-node' }, pino.destination({ fd: 1, sync: false }));
  let config: Awaited<ReturnType<typeof loadConfig<typeof nodeConfigSchema>>>;
  try {
    config = await loadConfig(nodeConfigSchema, options.configPath ? { path: options.configPath } : {});
  } catch (error) {
    process.stderr.write(`idem node: ${error instanceof Error ? error.message : String(error)}\n`);
    return 2;
  }
  const repository = await openRepository(config);
  let node: Awaited<ReturnType<typeof startDedupNode>>;
  try {
    node = await startDedupNode(config, repository, logger);
  } catch (error) {
    await repository.close().catch(() => {});
    logger.error({ err: error }, 'dedup node failed to start');
    return error instanceof IdempotencyError ? 2 : 3;
  }
  logger.info(
    {
      input: config.input.topic,
      output: config.output.topic,
      repository: config.repository.type,
      metricsPort: node.metricsPort,
    },
    'dedup node running',
  );
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  logger.info({ signal }, 'stopping: finishing the current batch');
  await node.stop();
  logger.info('stopped cleanly');
  logger.flush();
  return 0;
}
