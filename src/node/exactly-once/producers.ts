import { randomUUID } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { ConfigError } from '../../errors.js';
import type { GroupMetadata, KafkaClientCapabilities } from '../../kafka/port/index.js';
import { INSTANCE_ID, type NodeConfig, nodeDefaults } from '../options.js';

/** How an exactly-once node's transactional producers are laid out (see docs/node.md). */
export type TransactionalProducerLayout = 'per-partition' | 'per-instance';

/** What names and keeps this instance's id: `output.instanceId`, or a file beside a local store or checkpoint. */
export type InstanceIdSettings = Pick<NodeConfig, 'output' | 'repository' | 'changelog'>;

/**
 * `output.transactionalProducer`, resolved against the client: per-instance needs a client that sends the group's
 * generation with a transaction's offsets (KIP-447), since the group then fences a zombie. kafkajs does not.
 */
export function transactionalProducerLayout(
  config: Pick<NodeConfig, 'output' | 'kafka'>,
  capabilities: KafkaClientCapabilities,
): TransactionalProducerLayout {
  const asked = config.output.transactionalProducer;
  if (asked === 'per-instance' && !capabilities.fencesByGroup) {
    throw new ConfigError(
      'output.transactionalProducer',
      `"per-instance" needs a Kafka client that sends the group's generation with a transaction's offsets ` +
        `(kafka.client = "platformatic"); the client in use (${config.kafka.client}) does not, so a zombie could not be ` +
        'fenced. Use "per-partition" (the default on this client)',
    );
  }
  return asked ?? (capabilities.fencesByGroup ? 'per-instance' : 'per-partition');
}

/**
 * `output.transactionTimeout`, or the layout's default: per-instance only the timeout ends a crashed instance's
 * transaction, so it is shorter (see nodeDefaults.instanceTransactionTimeoutMs).
 */
export function transactionTimeoutMs(
  config: Pick<NodeConfig, 'output'>,
  layout: TransactionalProducerLayout,
): number {
  return (
    config.output.transactionTimeout ??
    (layout === 'per-instance'
      ? nodeDefaults.instanceTransactionTimeoutMs
      : nodeDefaults.transactionTimeoutMs)
  );
}

/**
 * The file that keeps this instance's id across restarts: beside a RocksDB store or a configured changelog
 * checkpoint. Undefined when nothing local survives a restart (the id is then new per process).
 */
export function instanceIdFile(config: InstanceIdSettings): string | undefined {
  const repository = config.repository as { type?: string; path?: string };
  if (repository.type === 'rocksdb' && repository.path) return `${repository.path}.instance-id`;
  if (config.changelog.checkpoint !== undefined) return `${config.changelog.checkpoint}.instance-id`;
  return undefined;
}

/**
 * This instance's id: `output.instanceId`, else the one kept in {@link instanceIdFile} (created on first use),
 * else a new one. A file that cannot be read fails naming it: a new id would leave the previous run's transaction open.
 */
export function resolveInstanceId(config: InstanceIdSettings): { id: string; source: string } {
  if (config.output.instanceId !== undefined)
    return { id: config.output.instanceId, source: 'output.instanceId' };
  const file = instanceIdFile(config);
  if (file === undefined) return { id: randomUUID(), source: 'new for this process' };
  let text: string | undefined;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new ConfigError('output.instanceId', `cannot read the instance id file ${file}`, {
        cause: error,
      });
    }
  }
  if (text !== undefined) {
    const id = text.trim();
    if (!INSTANCE_ID.test(id)) {
      throw new ConfigError(
        'output.instanceId',
        `${file} does not hold an instance id (letters, digits, ".", "_" or "-"); delete it to get a new one`,
      );
    }
    return { id, source: file };
  }
  const id = randomUUID();
  mkdirSync(dirname(file), { recursive: true });
  // Written whole or not at all: a crash mid-write must not leave a half id behind.
  writeFileSync(`${file}.tmp`, `${id}\n`);
  renameSync(`${file}.tmp`, file);
  return { id, source: file };
}

/**
 * Raised by a chunk's transaction when the group moved to another generation (or member id) while it ran: it is
 * aborted, and the records are read again under the new one.
 */
export class GenerationMovedError extends Error {
  override readonly name = 'GenerationMovedError';
  constructor(before: GroupMetadata, now: GroupMetadata) {
    super(
      `group ${before.groupId}: the chunk was read in generation ${before.generationId} (member ` +
        `${before.memberId}) and the member is now in ${now.generationId ?? 'none'} (${now.memberId ?? 'none'}); ` +
        'its transaction is aborted',
    );
  }
}

/** True when both name the same generation of the same member (a client that knows none always matches). */
export function sameGeneration(a: GroupMetadata, b: GroupMetadata): boolean {
  return a.generationId === b.generationId && a.memberId === b.memberId;
}
